#include "cc/core/runtime/autotuner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace tfdist {

namespace {

// More allreduces than any model's step has gradients: past this, no step.
constexpr size_t kMaxStepTensors = 100000;

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Median absolute deviation relative to the median: the spread a window's
// median can be trusted to, robust to the odd slow step.
double RelativeSpread(const std::vector<double>& values) {
  const double median = Median(values);
  if (values.size() < 2 || median <= 0) return 0;
  std::vector<double> deviations;
  for (double v : values) deviations.push_back(std::fabs(v - median));
  return Median(deviations) / median;
}

// Thresholds the fusion search considers: no fusion, then powers of 4 from
// 64 KiB to 1 GiB.
std::vector<uint64_t> FusionThresholds() {
  std::vector<uint64_t> t = {0};
  for (uint64_t bytes = uint64_t{64} << 10; bytes <= (uint64_t{1} << 30); bytes *= 4) {
    t.push_back(bytes);
  }
  return t;
}

uint64_t DoubleBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

double BitsDouble(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

const char* TuningPhaseName(TuningPhase phase) {
  switch (phase) {
    case TuningPhase::kBaseline: return "baseline";
    case TuningPhase::kGroups: return "gradient_groups";
    case TuningPhase::kFusion: return "fusion_threshold";
    case TuningPhase::kCycle: return "cycle_time";
    case TuningPhase::kAlgorithm: return "algorithm";
    case TuningPhase::kConfirmDefaults: return "confirm_defaults";
    case TuningPhase::kConfirmBest: return "confirm_best";
    case TuningPhase::kFinal: return "final";
  }
  return "unknown";
}

Autotuner::Autotuner(const TunedParameters& defaults, TuningModel model,
                     AutotuneOptions options)
    : defaults_(defaults),
      model_(std::move(model)),
      options_(options),
      proposal_(defaults),
      best_(defaults) {}

void Autotuner::OnAllreduce(const std::string& name, size_t bytes, double now) {
  if (done()) return;
  const size_t id = std::hash<std::string>()(name);
  if (!have_marker_) {
    marker_ = id;
    have_marker_ = true;
    marker_at_ = now;
    return;
  }
  step_bytes_ += bytes;
  step_sizes_.push_back(bytes);
  if (id == marker_) {
    OnStep(now - marker_at_, step_bytes_, marker_at_);
  } else if (seen_since_marker_.insert(id).second) {
    // Names that never recur (unnamed eager ops) would grow this for good.
    if (seen_since_marker_.size() <= kMaxStepTensors) return;
    marker_ = id;  // no step this long: start over from this tensor
    last_step_bytes_ = 0;
  } else {
    // Another name came back before the marker did: the marker was a
    // one-off (a broadcast of the initial weights, an unnamed op). The
    // name that recurred is the better marker, and its return closed a
    // step: not timed, but counted, since the budget counts the job's steps.
    marker_ = id;
    last_step_bytes_ = 0;
    ++steps_seen_;
  }
  marker_at_ = now;
  step_bytes_ = 0;
  step_sizes_.clear();
  seen_since_marker_.clear();
}

void Autotuner::Applied(uint64_t generation, double now) {
  if (generation != generation_ || applied_) return;
  applied_ = true;
  applied_at_ = now;
  if (proposal_.gradient_groups != running_groups_) {
    // The step's collectives now have other names: the marker will not
    // come back. The next tensor is the new marker; the step's bytes are
    // the same whatever the grouping, so the first step it closes counts.
    running_groups_ = proposal_.gradient_groups;
    have_marker_ = false;
    step_bytes_ = 0;
    step_sizes_.clear();
    seen_since_marker_.clear();
  }
}

void Autotuner::SetGroupCandidates(std::vector<int32_t> candidates) {
  if (phase_ == TuningPhase::kBaseline) groups_queue_ = std::move(candidates);
}

void Autotuner::OnStep(double seconds, uint64_t bytes, double began) {
  ++steps_seen_;
  const bool steady = bytes == last_step_bytes_;
  last_step_bytes_ = bytes;
  if (!steady || steps_seen_ <= options_.warmup_steps) return;
  profile_ = step_sizes_;
  if (done() || !applied_ || began < applied_at_) return;
  samples_.push_back(seconds);
  const int needed = phase_ == TuningPhase::kBaseline ? options_.baseline_samples
                                                      : options_.samples_per_trial;
  if (static_cast<int>(samples_.size()) >= needed) FinishTrial();
}

bool Autotuner::Better(const std::vector<double>& candidate,
                       const std::vector<double>& incumbent) const {
  const double noise = std::max(RelativeSpread(candidate), RelativeSpread(incumbent));
  const double margin = std::max(options_.min_gain, options_.noise_factor * noise);
  return Median(candidate) < Median(incumbent) * (1 - margin);
}

void Autotuner::FinishTrial() {
  if (phase_ != TuningPhase::kBaseline) {
    longest_trial_steps_ = std::max(longest_trial_steps_, steps_seen_ - trial_started_at_);
  }
  TrialResult result{phase_, proposal_, Median(samples_), static_cast<int>(samples_.size())};
  history_.push_back(result);
  last_result_ = result;
  const bool better = phase_ != TuningPhase::kBaseline && Better(samples_, best_samples_);
  switch (phase_) {
    case TuningPhase::kBaseline:
      default_samples_ = samples_;
      best_ = defaults_;
      best_samples_ = samples_;
      PlanFusionCandidates();
      break;
    case TuningPhase::kGroups:
      if (better) {
        best_ = proposal_;
        best_samples_ = samples_;
      }
      break;
    case TuningPhase::kFusion:
      if (better) {
        best_ = proposal_;
        best_samples_ = samples_;
      } else {
        fusion_queue_.clear();  // ordered by prediction: the rest promise less
      }
      break;
    case TuningPhase::kCycle:
      if (better) {
        best_ = proposal_;
        best_samples_ = samples_;
        cycle_improved_ = true;
      } else if (cycle_direction_ < 0 && !cycle_improved_) {
        cycle_direction_ = +1;  // shorter did not help: try longer
      } else {
        cycle_direction_ = 0;  // stop
      }
      break;
    case TuningPhase::kAlgorithm:
      if (better) {
        best_ = proposal_;
        best_samples_ = samples_;
      }
      break;
    case TuningPhase::kConfirmDefaults:
      confirm_defaults_samples_ = samples_;
      break;
    case TuningPhase::kConfirmBest:
      confirm_best_samples_ = samples_;
      break;
    case TuningPhase::kFinal:
      break;
  }
  samples_.clear();
  Next();
}

bool Autotuner::BudgetHoldsATrial() const {
  if (options_.max_steps <= 0) return true;
  // Until a trial has run, its counted steps, the step that spans the
  // switch and the one the proposal waits for a round to be broadcast in.
  const int trial = longest_trial_steps_ > 0 ? longest_trial_steps_
                                             : options_.samples_per_trial + 2;
  // The trial, then the defaults and the best again should it win, then the
  // steps before the final setting runs (a trial's, less its counted ones).
  const int switch_steps = trial - options_.samples_per_trial;
  return steps_seen_ + 3 * trial + switch_steps <= options_.max_steps;
}

void Autotuner::Next() {
  if (phase_ < TuningPhase::kConfirmDefaults && BudgetHoldsATrial() && ProposeExploration()) {
    return;
  }
  if (phase_ < TuningPhase::kConfirmDefaults && best_ != defaults_) {
    Propose(defaults_, TuningPhase::kConfirmDefaults);
    return;
  }
  if (phase_ == TuningPhase::kConfirmDefaults) {
    Propose(best_, TuningPhase::kConfirmBest);
    return;
  }
  bool keep = false;
  if (phase_ == TuningPhase::kConfirmBest) {
    // Pooled over both windows of each: a lucky first window of the best,
    // or an unlucky one of the defaults, is not enough to leave them.
    std::vector<double> best = best_samples_;
    best.insert(best.end(), confirm_best_samples_.begin(), confirm_best_samples_.end());
    std::vector<double> defaults = default_samples_;
    defaults.insert(defaults.end(), confirm_defaults_samples_.begin(),
                    confirm_defaults_samples_.end());
    keep = Better(best, defaults);
  }
  Propose(keep ? best_ : defaults_, TuningPhase::kFinal);
}

bool Autotuner::ProposeExploration() {
  if (phase_ <= TuningPhase::kGroups && !groups_queue_.empty()) {
    TunedParameters p = best_;
    p.gradient_groups = groups_queue_.front();
    groups_queue_.erase(groups_queue_.begin());
    Propose(p, TuningPhase::kGroups);
    return true;
  }
  if (phase_ <= TuningPhase::kFusion && !fusion_queue_.empty()) {
    TunedParameters p = best_;
    p.fusion_threshold_bytes = fusion_queue_.front();
    fusion_queue_.erase(fusion_queue_.begin());
    Propose(p, TuningPhase::kFusion);
    return true;
  }
  if (phase_ < TuningPhase::kCycle) {
    cycle_direction_ = -1;
    cycle_improved_ = false;
    cycle_trials_ = 0;
  }
  if (phase_ <= TuningPhase::kCycle) {
    while (cycle_direction_ != 0 && cycle_trials_ < 3) {
      const double next = cycle_direction_ < 0 ? best_.cycle_time_ms / 2 : best_.cycle_time_ms * 2;
      if (next < options_.min_cycle_time_ms || next > options_.max_cycle_time_ms) {
        cycle_direction_ = cycle_direction_ < 0 && !cycle_improved_ ? +1 : 0;
        continue;
      }
      ++cycle_trials_;
      TunedParameters p = best_;
      p.cycle_time_ms = next;
      Propose(p, TuningPhase::kCycle);
      return true;
    }
  }
  if (phase_ < TuningPhase::kAlgorithm) PlanAlgorithmCandidates();
  if (phase_ <= TuningPhase::kAlgorithm && !algorithm_queue_.empty()) {
    const auto [size_class, algorithm] = algorithm_queue_.front();
    algorithm_queue_.erase(algorithm_queue_.begin());
    TunedParameters p = best_;
    p.overrides.Set(size_class, algorithm);
    Propose(p, TuningPhase::kAlgorithm);
    return true;
  }
  return false;
}

void Autotuner::Propose(const TunedParameters& parameters, TuningPhase phase) {
  proposal_ = parameters;
  phase_ = phase;
  ++generation_;
  applied_ = false;
  trial_started_at_ = steps_seen_;
}

std::vector<size_t> Autotuner::GroupSizes(uint64_t threshold) const {
  // First fit in step order, as fusion.h's PlanFusion does for tensors that
  // may share a collective.
  std::vector<size_t> groups;
  std::vector<bool> open;
  for (size_t bytes : profile_) {
    bool placed = false;
    if (bytes <= threshold) {
      for (size_t g = 0; g < groups.size() && !placed; ++g) {
        if (open[g] && groups[g] + bytes <= threshold) {
          groups[g] += bytes;
          placed = true;
        }
      }
    }
    if (!placed) {
      groups.push_back(bytes);
      open.push_back(bytes <= threshold);
    }
  }
  return groups;
}

void Autotuner::PlanFusionCandidates() {
  fusion_queue_.clear();
  if (profile_.empty() || !model_.predict_seconds) return;
  std::vector<std::vector<size_t>> seen = {GroupSizes(defaults_.fusion_threshold_bytes)};
  std::vector<std::pair<double, uint64_t>> candidates;
  std::vector<uint64_t> thresholds = FusionThresholds();
  std::reverse(thresholds.begin(), thresholds.end());  // alike groupings: keep the largest
  for (uint64_t threshold : thresholds) {
    std::vector<size_t> groups = GroupSizes(threshold);
    if (std::find(seen.begin(), seen.end(), groups) != seen.end()) continue;
    double predicted = 0;
    for (size_t bytes : groups) predicted += model_.predict_seconds(bytes);
    candidates.emplace_back(predicted, threshold);
    seen.push_back(std::move(groups));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < candidates.size() &&
                     static_cast<int>(i) < options_.max_fusion_candidates; ++i) {
    fusion_queue_.push_back(candidates[i].second);
  }
}

void Autotuner::PlanAlgorithmCandidates() {
  algorithm_queue_.clear();
  if (profile_.empty() || !model_.ranked_algorithms || !model_.predict_seconds) return;
  // Predicted time and bytes per size class of the collectives the best
  // fusion threshold makes.
  std::vector<double> seconds(AlgorithmOverrides::kClasses, 0.0);
  std::vector<double> bytes(AlgorithmOverrides::kClasses, 0.0);
  std::vector<int> count(AlgorithmOverrides::kClasses, 0);
  for (size_t group : GroupSizes(best_.fusion_threshold_bytes)) {
    const int c = AlgorithmOverrides::SizeClass(group);
    seconds[c] += model_.predict_seconds(group);
    bytes[c] += static_cast<double>(group);
    ++count[c];
  }
  std::vector<int> classes;
  for (int c = 0; c < AlgorithmOverrides::kClasses; ++c) {
    if (count[c] > 0) classes.push_back(c);
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [&](int a, int b) { return seconds[a] > seconds[b]; });
  for (int c : classes) {
    if (static_cast<int>(algorithm_queue_.size()) >= options_.max_algorithm_classes) break;
    const size_t typical = static_cast<size_t>(bytes[c] / count[c]);
    const std::vector<AllreduceAlgorithm> ranked = model_.ranked_algorithms(typical);
    if (ranked.size() < 2) continue;
    algorithm_queue_.emplace_back(c, ranked[1]);  // the runner-up
  }
}

std::vector<uint64_t> EncodeTuning(const TuningBroadcast& b) {
  std::vector<uint64_t> words(kTuningWords, 0);
  words[0] = b.generation;
  words[1] = b.parameters.fusion_threshold_bytes;
  words[2] = DoubleBits(b.parameters.cycle_time_ms);
  words[3] = b.parameters.overrides.packed();
  words[4] = DoubleBits(b.previous.median_seconds);
  words[5] = static_cast<uint64_t>(std::min(b.previous.samples, 0xFFFF)) |
             (static_cast<uint64_t>(b.previous.phase) << 16) |
             (static_cast<uint64_t>(b.phase) << 24) |
             (static_cast<uint64_t>(static_cast<uint16_t>(b.parameters.gradient_groups + 1))
              << 32) |
             (static_cast<uint64_t>(std::clamp(b.step, 0, 0xFFFF)) << 48);
  words[6] = static_cast<uint64_t>(b.groups_from_iteration);
  return words;
}

bool DecodeTuning(const std::vector<uint64_t>& words, TuningBroadcast* out) {
  if (words.size() != kTuningWords) return false;
  const uint64_t phase = (words[5] >> 24) & 0xFF;
  const uint64_t previous_phase = (words[5] >> 16) & 0xFF;
  if (phase > static_cast<uint64_t>(TuningPhase::kFinal) ||
      previous_phase > static_cast<uint64_t>(TuningPhase::kFinal)) {
    return false;
  }
  out->generation = words[0];
  out->parameters.fusion_threshold_bytes = words[1];
  out->parameters.cycle_time_ms = BitsDouble(words[2]);
  out->parameters.overrides = AlgorithmOverrides::FromPacked(words[3]);
  out->parameters.gradient_groups = static_cast<int32_t>((words[5] >> 32) & 0xFFFF) - 1;
  out->groups_from_iteration = static_cast<int64_t>(words[6]);
  out->phase = static_cast<TuningPhase>(phase);
  out->previous = TrialResult{};
  out->previous.median_seconds = BitsDouble(words[4]);
  out->previous.samples = static_cast<int>(words[5] & 0xFFFF);
  out->previous.phase = static_cast<TuningPhase>(previous_phase);
  out->step = static_cast<int>(words[5] >> 48);
  return true;
}

}  // namespace tfdist
