// How many requests arrived together last time, by the request that came
// first, so the background thread knows when a repeating burst is complete.
//
// A graph hands over its collectives one kernel at a time, microseconds
// apart; the background thread waits for such a burst to finish arriving so
// that it is negotiated and fused in one round. Without memory, the only
// sign that a burst is over is a pause with no new request, and waiting for
// that pause (100 µs, more on a busy machine) is paid again every training
// step, on the critical path. A training step repeats its bursts, so the
// size of the burst that began with a given request last time says when
// this one is complete.
//
// A remembered size can be too small: a hiccup split a burst once (the
// thread handing it over was descheduled for longer than the pause), and
// from then on the round would start after the first part every time. So a
// burst that began soon after the previous one was taken into a round
// (within `continuation`) is counted as the rest of it: the next time, the
// round waits for the whole.
#ifndef TFDIST_CORE_RUNTIME_BURST_MEMORY_H_
#define TFDIST_CORE_RUNTIME_BURST_MEMORY_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <unordered_map>

namespace tfdist {

class BurstMemory {
 public:
  using Clock = std::chrono::steady_clock;

  // Bursts remembered at most; past it, memory starts afresh, so a program
  // that keeps inventing names cannot make it grow without bound.
  static constexpr size_t kCapacity = 4096;

  explicit BurstMemory(Clock::duration continuation) : continuation_(continuation) {}

  // The size of the last burst that began with `first`; 0 if none is known.
  size_t Expected(const std::string& first) const;

  // Records the burst just taken into a round: `size` requests, the first
  // of them `first`, queued from `began` until `taken`. Per-call sequence
  // names (unnamed eager ops) never repeat: such bursts are not recorded.
  void Taken(const std::string& first, size_t size, Clock::time_point began,
             Clock::time_point taken);

  size_t size() const { return sizes_.size(); }

 private:
  void Remember(const std::string& first, size_t size);

  const Clock::duration continuation_;
  std::unordered_map<std::string, size_t> sizes_;
  // The burst that the next one may continue.
  std::string last_first_;
  size_t last_size_ = 0;
  Clock::time_point last_taken_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_BURST_MEMORY_H_
