// The runtime's side of autotuning (TFDIST_AUTOTUNE): on rank 0 it feeds the
// Autotuner (autotuner.h) with completed allreduces and hands its proposal
// to the negotiation's broadcast words; on every rank it reads the words
// after each round, says when the parameters change (the same round on
// every rank, since all read the same AND) and writes the trials to the
// CSV log (TFDIST_AUTOTUNE_LOG).
//
// It also owns the schedule of gradient groupings (gradient_groups_
// schedule.h): a proposal that changes the grouping takes effect from the
// iteration rank 0 named, and rank 0's tuner is told it applied only once a
// step of that grouping has begun, so no step of the old grouping is
// charged to the new one.
//
// The log has one row per finished trial, written by every rank in the
// round the next proposal took effect, and a last row "final" with what
// stays; the rows are identical on every rank (the tests compare them):
//   generation,round,step,phase,fusion_threshold_bytes,cycle_time_ms,
//   algorithm_overrides,gradient_groups,median_step_ms,steps
// `round` is the negotiation round after which the row's successor ran,
// `step` the training steps rank 0's tuner had seen when it proposed that
// successor; gradient_groups is "default" where the step's own grouping ran.
#ifndef TFDIST_CORE_RUNTIME_AUTOTUNE_SESSION_H_
#define TFDIST_CORE_RUNTIME_AUTOTUNE_SESSION_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/runtime/autotuner.h"
#include "cc/core/runtime/gradient_groups_schedule.h"

namespace tfdist {

class AutotuneSession {
 public:
  AutotuneSession(int rank, const TunedParameters& defaults, TuningModel model,
                  AutotuneOptions options = {});
  // Opens the log (`path` + ".<rank>" when size > 1); empty path: no log.
  Status OpenLog(const std::string& path, int rank, int size);

  // Rank 0: the words for the next round's broadcast.
  std::vector<uint64_t> Words() const;
  // After round `round` (counted alike on every rank): true, with the new
  // parameters in *apply, when they change now.
  bool OnRound(const std::vector<uint64_t>& broadcast, uint64_t round, double now,
               TunedParameters* apply);
  // Every allreduced tensor this rank completed (rank 0 measures; others ignore).
  void OnAllreduce(const std::string& name, size_t bytes, double now);

  // Asked by a traced step (any thread): which of `candidates` (num_groups
  // values, the traced one first) the step at `iteration` runs, as an index.
  int AskGradientGroups(const std::vector<int32_t>& candidates, int64_t iteration, double now);

  const Autotuner* tuner() const { return tuner_.get(); }
  const GradientGroupsSchedule& schedule() const { return schedule_; }
  uint64_t generation() const { return generation_; }

 private:
  void WriteRow(uint64_t generation, uint64_t round, int step, TuningPhase phase,
                const TunedParameters& parameters, const TrialResult* result);
  // Rank 0, at each round: hands the tuner the step's candidates once they
  // are known, and tells it when a change of grouping has taken effect. A
  // round is soon enough: a step's tensors are submitted after its op asked,
  // so they run in a round that follows the ask.
  void FollowGroups();

  std::unique_ptr<Autotuner> tuner_;  // rank 0 only
  GradientGroupsSchedule schedule_;
  bool candidates_given_ = false;
  uint64_t waiting_generation_ = 0;  // a grouping change not yet in force (0: none)
  uint64_t generation_ = 0;
  TunedParameters applied_;
  TuningPhase applied_phase_ = TuningPhase::kBaseline;
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> log_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_AUTOTUNE_SESSION_H_
