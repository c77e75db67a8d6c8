// Online autotuning of the runtime's knobs while training runs
// (TFDIST_AUTOTUNE; docs/runtime.md "Autotuning"). Pure logic over numbers
// and a clock the caller passes in, so the unit tests drive it with fake
// step times.
//
// Only rank 0 runs an Autotuner: it measures, decides, and its proposal
// rides on every negotiation round (Negotiator's broadcast words, encoded by
// EncodeTuning), so every rank switches to it in the same round. The other
// ranks only decode and apply (runtime.cc).
//
// What it measures: the step time, as the time between two completions of
// one recurring allreduce (the "marker", the first tensor name seen to
// recur). Every synchronous training step reduces each gradient once, so
// that interval is the whole step, computation and overlap included, however
// the step's tensors are split into rounds and fused: the quantity the
// knobs should minimise. A step counts only when its allreduced bytes equal
// the previous step's (a steady workload: an evaluation or a checkpoint in
// between is not a step) and it began after the parameters it is charged to
// were applied everywhere.
//
// How it searches, one knob after the other, each starting from the current
// best (coordinate descent), each trial a window of `samples_per_trial`
// steps compared by medians:
//   1. baseline: the defaults;
//   2. gradient groups: where the step was traced with other groupings to
//      choose from (gradient_groups_schedule.h), each of them in turn; kept
//      where it improves;
//   3. fusion threshold: candidates ordered by the cost model's predicted
//      communication time of the measured step's tensors, grouped as that
//      threshold would group them (thresholds that group alike are one
//      candidate); stops at the first that does not improve;
//   4. cycle time: halve while it improves, else double while it improves;
//   5. per-size algorithm overrides: for the size classes (algorithm_
//      overrides.h) carrying most predicted time, the cost model's
//      runner-up algorithm; kept where it improves;
//   6. confirmation: defaults, then the best, measured again; the best is
//      kept only if its pooled samples beat the defaults' pooled samples by
//      the noise-aware margin. Otherwise the defaults stay: it never ends
//      worse than the defaults by more than the noise it can see.
// The whole search fits in `max_steps` steps: a trial of steps 2-5 starts
// only while the steps left hold it, a confirmation after it (each as long
// as the longest trial so far took, switches included) and the switch to
// the final setting; past that it goes straight to 6. The confirmation
// always runs where the best is not the defaults, so the budget never costs
// the guarantee above.
// "Improves" means: median below the incumbent's median by more than
// max(min_gain, noise_factor x the larger relative median absolute
// deviation of the two windows).
#ifndef TFDIST_CORE_RUNTIME_AUTOTUNER_H_
#define TFDIST_CORE_RUNTIME_AUTOTUNER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/runtime/algorithm_overrides.h"
#include "cc/core/runtime/gradient_groups_schedule.h"

namespace tfdist {

// The knobs the tuner sets, all applied by every rank in the same round.
struct TunedParameters {
  uint64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 1.0;
  AlgorithmOverrides overrides;
  // DistributedOptimizer's num_groups; kTracedGroups: as traced.
  int32_t gradient_groups = kTracedGroups;

  bool operator==(const TunedParameters& o) const {
    return fusion_threshold_bytes == o.fusion_threshold_bytes &&
           cycle_time_ms == o.cycle_time_ms && overrides == o.overrides &&
           gradient_groups == o.gradient_groups;
  }
  bool operator!=(const TunedParameters& o) const { return !(*this == o); }
};

enum class TuningPhase : uint8_t {
  kBaseline = 0,
  kGroups = 1,
  kFusion = 2,
  kCycle = 3,
  kAlgorithm = 4,
  kConfirmDefaults = 5,
  kConfirmBest = 6,
  kFinal = 7,
};
const char* TuningPhaseName(TuningPhase phase);

// What the tuner asks of the cost model (cost_model.h in production, fakes
// in the tests).
struct TuningModel {
  // Predicted seconds of one allreduce of `bytes` with the algorithm auto
  // would pick (overrides aside).
  std::function<double(size_t bytes)> predict_seconds;
  // The algorithms for `bytes`, predicted fastest first; empty when
  // overrides cannot apply (a forced TFDIST_ALLREDUCE_ALGORITHM).
  std::function<std::vector<AllreduceAlgorithm>(size_t bytes)> ranked_algorithms;
};

struct AutotuneOptions {
  int warmup_steps = 3;        // steps ignored at the start (tracing, first touches)
  int samples_per_trial = 3;   // measured steps per trial (the step that spans a switch never counts)
  int baseline_samples = 5;    // the defaults' first window
  double min_gain = 0.02;      // a candidate must be this much faster (relative) ...
  double noise_factor = 1.5;   // ... and this many relative MADs faster
  int max_fusion_candidates = 3;
  int max_algorithm_classes = 2;
  double min_cycle_time_ms = 0.05;
  double max_cycle_time_ms = 20.0;
  // The search is final by this step (counted from the first step seen,
  // warm-up included) while the steps keep their length; 0: no limit.
  // Issue 25 asks for the tuned setting within 50 steps.
  int max_steps = 50;
};

// A finished trial: what ran and how it measured.
struct TrialResult {
  TuningPhase phase = TuningPhase::kBaseline;
  TunedParameters parameters;
  double median_seconds = 0;
  int samples = 0;
};

class Autotuner {
 public:
  Autotuner(const TunedParameters& defaults, TuningModel model, AutotuneOptions options = {});

  // Every allreduced tensor this rank completed, in completion order, with
  // its size in the accumulation type; `now` in seconds on any steady clock.
  void OnAllreduce(const std::string& name, size_t bytes, double now);
  // The proposal of `generation` took effect on every rank at `now`.
  void Applied(uint64_t generation, double now);
  // The num_groups values the traced step can switch to besides its own,
  // tried after the baseline; ignored once the baseline is over.
  void SetGroupCandidates(std::vector<int32_t> candidates);

  // What every rank should run; generation 0 is the defaults, each change
  // increments it.
  const TunedParameters& proposal() const { return proposal_; }
  uint64_t generation() const { return generation_; }
  TuningPhase phase() const { return phase_; }
  bool done() const { return phase_ == TuningPhase::kFinal; }
  // The trial the current proposal follows (for the log); samples 0 before the first.
  const TrialResult& last_result() const { return last_result_; }
  // Every trial so far, in order.
  const std::vector<TrialResult>& history() const { return history_; }
  // Steps measured so far (counted or not), from the first marker on.
  int steps_seen() const { return steps_seen_; }

 private:
  void OnStep(double seconds, uint64_t bytes, double began);
  void FinishTrial();
  // Moves to the next trial of the search (or the final choice).
  void Next();
  // Proposes the next trial of steps 2-5 of the search; false when none is left.
  bool ProposeExploration();
  // Whether the steps left hold one more trial and a confirmation after it.
  bool BudgetHoldsATrial() const;
  void Propose(const TunedParameters& parameters, TuningPhase phase);
  void PlanFusionCandidates();
  void PlanAlgorithmCandidates();
  bool Better(const std::vector<double>& candidate, const std::vector<double>& incumbent) const;
  // Sizes of the collectives `threshold` makes of the last step's tensors.
  std::vector<size_t> GroupSizes(uint64_t threshold) const;

  TunedParameters defaults_;
  TuningModel model_;
  AutotuneOptions options_;

  TunedParameters proposal_;
  uint64_t generation_ = 0;
  bool applied_ = true;  // generation 0 runs from the start
  double applied_at_ = -1e300;
  TuningPhase phase_ = TuningPhase::kBaseline;
  std::vector<double> samples_;

  TunedParameters best_;
  std::vector<double> best_samples_;
  std::vector<double> default_samples_;
  std::vector<double> confirm_defaults_samples_;
  std::vector<double> confirm_best_samples_;
  std::vector<int32_t> groups_queue_;
  std::vector<uint64_t> fusion_queue_;
  std::vector<std::pair<int, AllreduceAlgorithm>> algorithm_queue_;  // (size class, runner-up)
  int cycle_direction_ = 0;  // -1 halving, +1 doubling, 0 stopped
  bool cycle_improved_ = false;
  int cycle_trials_ = 0;

  // The grouping the step's tensors are named after (the last applied).
  int32_t running_groups_ = kTracedGroups;

  // The marker and the step in progress.
  size_t marker_ = 0;
  bool have_marker_ = false;
  double marker_at_ = 0;
  uint64_t step_bytes_ = 0;
  std::vector<size_t> step_sizes_;
  std::unordered_set<size_t> seen_since_marker_;  // name hashes, to find a recurring one
  uint64_t last_step_bytes_ = 0;
  std::vector<size_t> profile_;  // the last steady step's tensor sizes, in order
  int steps_seen_ = 0;
  int trial_started_at_ = 0;     // steps_seen_ when the current proposal was made
  int longest_trial_steps_ = 0;  // the longest a trial (not the baseline) took, in steps

  TrialResult last_result_;
  std::vector<TrialResult> history_;
};

// The proposal as the words rank 0 broadcasts every round (Negotiator), and
// back. kTuningWords words; generation 0 means "nothing proposed yet".
constexpr size_t kTuningWords = 7;
struct TuningBroadcast {
  uint64_t generation = 0;
  TunedParameters parameters;
  // The iteration from which parameters.gradient_groups may take effect
  // (GradientGroupsSchedule::SafeIteration on rank 0).
  int64_t groups_from_iteration = 0;
  TuningPhase phase = TuningPhase::kBaseline;  // of this proposal
  TrialResult previous;  // the trial that ended with this proposal (samples 0: none)
  // Steps the tuner had seen when it made this proposal (capped at 65535).
  int step = 0;
};
std::vector<uint64_t> EncodeTuning(const TuningBroadcast& broadcast);
bool DecodeTuning(const std::vector<uint64_t>& words, TuningBroadcast* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_AUTOTUNER_H_
