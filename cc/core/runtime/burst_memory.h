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
#ifndef TFDIST_CORE_RUNTIME_BURST_MEMORY_H_
#define TFDIST_CORE_RUNTIME_BURST_MEMORY_H_

#include <cstddef>
#include <string>
#include <unordered_map>

namespace tfdist {

class BurstMemory {
 public:
  // Bursts remembered at most; past it, memory starts afresh, so a program
  // that keeps inventing names cannot make it grow without bound.
  static constexpr size_t kCapacity = 4096;

  // The size of the last burst that began with `first`; 0 if none is known.
  size_t Expected(const std::string& first) const;

  // Records that the burst beginning with `first` held `size` requests.
  // Per-call sequence names (unnamed eager ops) never repeat: not recorded.
  void Remember(const std::string& first, size_t size);

  size_t size() const { return sizes_.size(); }

 private:
  std::unordered_map<std::string, size_t> sizes_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_BURST_MEMORY_H_
