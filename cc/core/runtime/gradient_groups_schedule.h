// Which gradient grouping (DistributedOptimizer's num_groups) a traced
// training step runs while the autotuner may change it (docs/runtime.md
// "Autotuning"). The step is traced once with every candidate grouping as a
// branch; a small op asks this schedule, at the start of each step's
// allreduces, which branch to take.
//
// Every rank must take the same branch in the same step, or their
// collectives would differ. The autotuner's changes reach every rank in the
// same negotiation round, but a rank may ask before that round or after it.
// So a change is not keyed to the round but to the optimizer's iteration,
// which is the same on every rank at the same step: rank 0 proposes "from
// iteration E on", with E two past the highest iteration it has asked for.
// No rank can have asked for E yet: a rank can be at most one step ahead of
// another, since a step's allreduces complete only once every rank has
// submitted them.
//
// Thread-safe: the op asks from TensorFlow's threads, the runtime changes
// the schedule from its own.
#ifndef TFDIST_CORE_RUNTIME_GRADIENT_GROUPS_SCHEDULE_H_
#define TFDIST_CORE_RUNTIME_GRADIENT_GROUPS_SCHEDULE_H_

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace tfdist {

// The grouping the step was traced with (the candidates' first).
constexpr int32_t kTracedGroups = -1;

class GradientGroupsSchedule {
 public:
  // The traced step's candidate num_groups values, the default first. The
  // first step registers them; later registrations are ignored.
  void Register(const std::vector<int32_t>& candidates);
  std::vector<int32_t> candidates() const;

  // The step at `iteration` asks, at `now` (seconds), which candidate to run:
  // its index in the candidates.
  int Ask(int64_t iteration, double now);

  // The first iteration a change decided now can take effect from on every
  // rank.
  int64_t SafeIteration() const;
  // From `from_iteration` on, steps run `groups` (kTracedGroups: the default).
  void Change(int32_t groups, int64_t from_iteration);
  // The groups in force for `iteration`.
  int32_t GroupsAt(int64_t iteration) const;
  // When this rank first ran a step under the last change (< 0: not yet, or
  // no change).
  double last_change_in_force_at() const;

 private:
  int32_t GroupsAtLocked(int64_t iteration) const;

  mutable std::mutex mutex_;
  std::vector<int32_t> candidates_;
  std::vector<std::pair<int64_t, int32_t>> changes_;  // (from iteration, groups)
  bool asked_ = false;
  int64_t highest_asked_ = 0;
  double in_force_at_ = -1;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_GRADIENT_GROUPS_SCHEDULE_H_
