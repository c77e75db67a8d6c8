// The autotuner (autotuner.h) driven by fake step times: a simulated
// training loop whose step time is a function of the proposed parameters,
// with deterministic noise. Checks that it converges to the faster setting,
// never ends on a slower one, sees through noise and finds steps in a
// stream of named allreduces.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/core/runtime/algorithm_overrides.h"
#include "cc/core/runtime/autotuner.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AlgorithmOverrides;
using tfdist::AllreduceAlgorithm;
using tfdist::Autotuner;
using tfdist::TunedParameters;
using tfdist::TuningModel;
using tfdist::TuningPhase;

constexpr uint64_t kDefaultThreshold = uint64_t{64} << 20;

TunedParameters Defaults() {
  TunedParameters p;
  p.fusion_threshold_bytes = kDefaultThreshold;
  p.cycle_time_ms = 1.0;
  return p;
}

// A cost model where every collective costs 50 µs + 1 ns per byte, and the
// algorithms rank Rabenseifner, ring, tree at every size.
TuningModel FakeModel() {
  TuningModel model;
  model.predict_seconds = [](size_t bytes) { return 50e-6 + 1e-9 * static_cast<double>(bytes); };
  model.ranked_algorithms = [](size_t) {
    return std::vector<AllreduceAlgorithm>{AllreduceAlgorithm::kRabenseifner,
                                           AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree};
  };
  return model;
}

// Deterministic noise in [-amplitude, +amplitude], relative.
class Noise {
 public:
  explicit Noise(double amplitude) : amplitude_(amplitude) {}
  double operator()() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(state_ >> 11) / static_cast<double>(1ULL << 53);
    return 1 + amplitude_ * (2 * unit - 1);
  }

 private:
  double amplitude_;
  uint64_t state_ = 12345;
};

struct Run {
  TunedParameters final_parameters;
  int steps_to_final = -1;  // steps run until the final proposal was made
  bool done = false;
  std::vector<tfdist::TrialResult> history;
  uint64_t generations = 0;
};

// Trains `steps` steps of `sizes` (tensor bytes, named g0, g1, ...), each
// taking step_seconds(parameters in force) x noise, applying each proposal
// at the next step boundary as the runtime's broadcast would, or
// `apply_delay` steps later (as a change of grouping waits for an iteration
// no rank has reached). A one-off tensor ("init") comes first, as a
// broadcast of the weights would. `groups` are handed to the tuner at the
// start, as the traced step's other groupings.
Run Train(const std::vector<size_t>& sizes,
          const std::function<double(const TunedParameters&)>& step_seconds, double noise,
          int steps = 200, tfdist::AutotuneOptions options = {}, int apply_delay = 0,
          std::vector<int32_t> groups = {}) {
  Autotuner tuner(Defaults(), FakeModel(), options);
  tuner.SetGroupCandidates(std::move(groups));
  Noise jitter(noise);
  double now = 100.0;
  tuner.OnAllreduce("init", 4, now);
  uint64_t applied = 0;
  uint64_t proposed = 0;
  int proposed_at = 0;
  TunedParameters in_force = Defaults();
  Run run;
  for (int step = 0; step < steps; ++step) {
    if (tuner.generation() != proposed) {
      proposed = tuner.generation();
      proposed_at = step;
    }
    if (proposed != applied && step - proposed_at >= apply_delay) {
      applied = tuner.generation();
      in_force = tuner.proposal();
      tuner.Applied(applied, now);
      if (tuner.done() && run.steps_to_final < 0) run.steps_to_final = step;
    }
    const double seconds = step_seconds(in_force) * jitter();
    for (size_t i = 0; i < sizes.size(); ++i) {
      now += seconds / static_cast<double>(sizes.size());
      tuner.OnAllreduce("g" + std::to_string(i), sizes[i], now);
    }
  }
  run.final_parameters = tuner.proposal();
  run.done = tuner.done();
  run.history = tuner.history();
  run.generations = tuner.generation();
  return run;
}

// An MLP-like step: many small tensors and two of 1-2 MB.
std::vector<size_t> MixedSizes() {
  std::vector<size_t> sizes(20, 4096);
  sizes.push_back(1 << 20);
  sizes.push_back(2 << 20);
  return sizes;
}

}  // namespace

TFDIST_TEST(AutotunerFindsAFasterFusionThreshold) {
  // Steps are 20% faster when the small tensors and the large ones are not
  // fused together (any threshold up to 1 MiB), as if fusing cost a copy.
  auto step = [](const TunedParameters& p) {
    return p.fusion_threshold_bytes <= (1u << 20) ? 8e-3 : 10e-3;
  };
  const Run run = Train(MixedSizes(), step, 0.02);
  CHECK(run.done);
  CHECK_EQ_MSG(run.final_parameters.fusion_threshold_bytes <= (1u << 20), true,
               "final threshold " << run.final_parameters.fusion_threshold_bytes);
  CHECK(run.history.front().phase == TuningPhase::kBaseline);
  CHECK_EQ(run.history.front().parameters == Defaults(), true);
  // Within the budget of 50 steps.
  CHECK_EQ_MSG(run.steps_to_final > 0 && run.steps_to_final <= 50, true,
               "final after " << run.steps_to_final << " steps");
}

TFDIST_TEST(AutotunerKeepsTheDefaultsWhenNothingHelps) {
  // The same step time whatever the parameters, with ±5% noise: no
  // candidate may win by chance.
  const Run run = Train(MixedSizes(), [](const TunedParameters&) { return 10e-3; }, 0.05);
  CHECK(run.done);
  CHECK_EQ(run.final_parameters == Defaults(), true);
  CHECK(run.history.size() >= 3);  // it did try something
}

TFDIST_TEST(AutotunerNeverEndsWorseThanTheDefaults) {
  // Every departure from the defaults is slower.
  auto step = [](const TunedParameters& p) { return p == Defaults() ? 10e-3 : 12e-3; };
  for (double noise : {0.0, 0.03, 0.08}) {
    const Run run = Train(MixedSizes(), step, noise);
    CHECK(run.done);
    CHECK_EQ_MSG(run.final_parameters == Defaults(), true, "noise " << noise);
  }
}

TFDIST_TEST(AutotunerIgnoresGainsWithinTheNoise) {
  // A 1% gain (below min_gain) under 4% noise is not taken.
  auto step = [](const TunedParameters& p) {
    return p.fusion_threshold_bytes <= (1u << 20) ? 9.9e-3 : 10e-3;
  };
  const Run run = Train(MixedSizes(), step, 0.04);
  CHECK(run.done);
  CHECK_EQ(run.final_parameters.fusion_threshold_bytes, kDefaultThreshold);
}

TFDIST_TEST(AutotunerShortensTheCycleTimeWhileItHelps) {
  // Shorter cycles help down to 0.25 ms, and are worse below.
  auto step = [](const TunedParameters& p) {
    const double c = p.cycle_time_ms;
    return 10e-3 + (c >= 0.25 ? 2e-3 * c : 3e-3);
  };
  const Run run = Train(MixedSizes(), step, 0.01);
  CHECK(run.done);
  CHECK_EQ_MSG(run.final_parameters.cycle_time_ms, 0.25, "cycle time");
}

TFDIST_TEST(AutotunerLengthensTheCycleTimeWhenShorterDoesNotHelp) {
  auto step = [](const TunedParameters& p) { return p.cycle_time_ms >= 2 ? 8e-3 : 10e-3; };
  const Run run = Train(MixedSizes(), step, 0.01);
  CHECK(run.done);
  CHECK_EQ_MSG(run.final_parameters.cycle_time_ms >= 2, true,
               "cycle time " << run.final_parameters.cycle_time_ms);
}

TFDIST_TEST(AutotunerTriesTheCostModelsRunnerUpPerSizeClass) {
  // The ring (the fake model's runner-up) is faster for the 2 MiB tensor's
  // class; the model's first choice is what auto runs by default.
  const int big = AlgorithmOverrides::SizeClass(2 << 20);
  auto step = [big](const TunedParameters& p) {
    return p.overrides.ForClass(big) == AllreduceAlgorithm::kRing ? 8e-3 : 10e-3;
  };
  // One large tensor per step, so the threshold groups alike whatever it is.
  const Run run = Train({2 << 20}, step, 0.02);
  CHECK(run.done);
  CHECK(run.final_parameters.overrides.ForClass(big) == AllreduceAlgorithm::kRing);
  bool tried_algorithm = false;
  for (const auto& trial : run.history) tried_algorithm |= trial.phase == TuningPhase::kAlgorithm;
  CHECK(tried_algorithm);
}

TFDIST_TEST(AutotunerTriesTheTracedGroupingsAndKeepsAFasterOne) {
  // num_groups 2 is 20% faster; 0 is slower. The tuner tries both after the
  // baseline and keeps 2 through the confirmation.
  auto step = [](const TunedParameters& p) {
    return p.gradient_groups == 2 ? 8e-3 : p.gradient_groups == 0 ? 12e-3 : 10e-3;
  };
  // Runs `steps` steps (or to the end of the search), giving the tuner
  // `candidates` at step `give_at`; returns the phases of its proposals.
  auto drive = [&](Autotuner* tuner, int give_at, const std::vector<int32_t>& candidates) {
    Noise jitter(0.02);
    double now = 100.0;
    uint64_t applied = 0;
    TunedParameters in_force = Defaults();
    std::vector<TuningPhase> phases;
    for (int s = 0; s < 300 && !tuner->done(); ++s) {
      if (s == give_at) tuner->SetGroupCandidates(candidates);
      if (tuner->generation() != applied) {
        applied = tuner->generation();
        in_force = tuner->proposal();
        phases.push_back(tuner->phase());
        tuner->Applied(applied, now);
      }
      const double seconds = step(in_force) * jitter();
      for (int i = 0; i < 3; ++i) {
        now += seconds / 3;
        tuner->OnAllreduce("g" + std::to_string(i), 1 << 16, now);
      }
    }
    return phases;
  };
  Autotuner tuner(Defaults(), FakeModel());
  const std::vector<TuningPhase> phases = drive(&tuner, 0, {0, 2});
  CHECK(tuner.done());
  CHECK_EQ(tuner.proposal().gradient_groups, 2);
  CHECK(phases.size() >= 2 && phases[0] == TuningPhase::kGroups &&
        phases[1] == TuningPhase::kGroups);
  // Candidates that arrive after the baseline are ignored: the search has
  // moved on, and the defaults' grouping stays.
  Autotuner late(Defaults(), FakeModel());
  for (TuningPhase phase : drive(&late, 20, {2})) CHECK(phase != TuningPhase::kGroups);
  CHECK(late.done());
  CHECK_EQ(late.proposal().gradient_groups, tfdist::kTracedGroups);
}

TFDIST_TEST(AutotunerEndsWithinItsStepBudget) {
  // Every knob helps, each step of it: the search would try them all (a
  // grouping, fusion, three cycle times, two algorithm classes) and confirm,
  // and each proposal takes 3 steps to apply. Unbounded, that is longer than
  // 50 steps; with the default budget it is final by step 50, keeps what it
  // had confirmed, and still ends faster than the defaults.
  const int big = AlgorithmOverrides::SizeClass(2 << 20);
  auto step = [big](const TunedParameters& p) {
    double t = 10e-3;
    if (p.gradient_groups == 2) t *= 0.9;
    if (p.fusion_threshold_bytes < kDefaultThreshold) t *= 0.9;
    for (double c = p.cycle_time_ms; c < 1.0; c *= 2) t *= 0.9;
    if (p.overrides.ForClass(big) != AllreduceAlgorithm::kAuto) t *= 0.9;
    return t;
  };
  tfdist::AutotuneOptions unbounded;
  unbounded.max_steps = 0;
  const Run longer = Train(MixedSizes(), step, 0.01, 200, unbounded, 3, {2});
  CHECK(longer.done);
  CHECK_EQ_MSG(longer.steps_to_final > 50, true, "unbounded: final after "
                                                     << longer.steps_to_final << " steps");
  for (int delay : {0, 1, 2, 3}) {
    for (double noise : {0.0, 0.01, 0.05}) {
      const Run run = Train(MixedSizes(), step, noise, 200, {}, delay, {2});
      CHECK(run.done);
      CHECK_EQ_MSG(run.steps_to_final > 0 && run.steps_to_final <= 50, true,
                   "final after " << run.steps_to_final << " steps, delay " << delay
                                  << ", noise " << noise);
    }
  }
  const Run run = Train(MixedSizes(), step, 0.01, 200, {}, 3, {2});
  CHECK_EQ_MSG(run.history.size() < longer.history.size(), true,
               run.history.size() << " trials against " << longer.history.size());
  CHECK(step(run.final_parameters) < 0.9 * step(Defaults()));
  // It stopped exploring, not confirming: the last two trials are the confirmation.
  const size_t n = run.history.size();
  CHECK(n >= 3 && run.history[n - 2].phase == TuningPhase::kConfirmDefaults &&
        run.history[n - 1].phase == TuningPhase::kConfirmBest);
  // A budget too small for any trial after the baseline: the defaults stay.
  tfdist::AutotuneOptions tiny;
  tiny.max_steps = 12;
  const Run none = Train(MixedSizes(), step, 0.01, 200, tiny, 3, {2});
  CHECK(none.done);
  CHECK_EQ(none.history.size(), size_t{1});
  CHECK_EQ(none.final_parameters == Defaults(), true);
}

TFDIST_TEST(AutotunerProposesNothingWithoutRecurringSteps) {
  Autotuner tuner(Defaults(), FakeModel());
  double now = 0;
  for (int i = 0; i < 5000; ++i) {
    now += 1e-3;
    tuner.OnAllreduce("Allreduce.eager." + std::to_string(i), 1024, now);
  }
  CHECK_EQ(tuner.generation(), uint64_t{0});
  CHECK_EQ(tuner.steps_seen(), 0);
}

TFDIST_TEST(AutotunerMeasuresOnlyStepsThatBeganAfterTheSwitch) {
  // Proposals that are never applied gather no samples: the tuner waits.
  Autotuner tuner(Defaults(), FakeModel());
  double now = 0;
  for (int step = 0; step < 200; ++step) {
    for (int i = 0; i < 3; ++i) {
      now += 1e-3;
      tuner.OnAllreduce("g" + std::to_string(i), 1 << 10, now);
    }
  }
  CHECK_EQ(tuner.generation(), uint64_t{1});  // the first candidate, never applied
  CHECK_EQ(tuner.history().size(), size_t{1});  // only the baseline was measured
}

TFDIST_TEST(AutotuneBroadcastRoundTrips) {
  tfdist::TuningBroadcast b;
  b.generation = 7;
  b.parameters.fusion_threshold_bytes = 1 << 18;
  b.parameters.cycle_time_ms = 0.375;
  b.parameters.overrides.Set(10, AllreduceAlgorithm::kRing);
  b.phase = TuningPhase::kAlgorithm;
  b.previous.median_seconds = 0.0123;
  b.previous.samples = 3;
  b.previous.phase = TuningPhase::kCycle;
  b.parameters.gradient_groups = 0;
  b.groups_from_iteration = int64_t{1} << 40;
  b.step = 1234;
  tfdist::TuningBroadcast back;
  CHECK(tfdist::DecodeTuning(tfdist::EncodeTuning(b), &back));
  CHECK_EQ(back.generation, uint64_t{7});
  CHECK_EQ(back.parameters == b.parameters, true);
  CHECK(back.phase == TuningPhase::kAlgorithm);
  CHECK_EQ(back.previous.median_seconds, 0.0123);
  CHECK_EQ(back.previous.samples, 3);
  CHECK(back.previous.phase == TuningPhase::kCycle);
  CHECK_EQ(back.parameters.gradient_groups, 0);
  CHECK_EQ(back.groups_from_iteration, int64_t{1} << 40);
  CHECK_EQ(back.step, 1234);
  b.step = 1 << 20;  // past what the log needs: capped, not wrapped
  CHECK(tfdist::DecodeTuning(tfdist::EncodeTuning(b), &back));
  CHECK_EQ(back.step, 0xFFFF);
  for (int32_t groups : {tfdist::kTracedGroups, 1, 4, 1000}) {
    b.parameters.gradient_groups = groups;
    CHECK(tfdist::DecodeTuning(tfdist::EncodeTuning(b), &back));
    CHECK_EQ(back.parameters.gradient_groups, groups);
  }
  // All ones (what a rank that is not rank 0 contributes) is not a proposal.
  CHECK(!tfdist::DecodeTuning(std::vector<uint64_t>(tfdist::kTuningWords, ~uint64_t{0}), &back));
}

TFDIST_TEST(AlgorithmOverridesPackSizeClasses) {
  CHECK_EQ(AlgorithmOverrides::SizeClass(0), 0);
  CHECK_EQ(AlgorithmOverrides::SizeClass(3), 0);
  CHECK_EQ(AlgorithmOverrides::SizeClass(4), 1);
  CHECK_EQ(AlgorithmOverrides::SizeClass(1 << 20), 10);
  CHECK_EQ(AlgorithmOverrides::SizeClass((4 << 20) - 1), 10);
  CHECK_EQ(AlgorithmOverrides::SizeClass(size_t{1} << 40), AlgorithmOverrides::kClasses - 1);
  CHECK_EQ(AlgorithmOverrides::ClassFloor(10), size_t{1} << 20);
  AlgorithmOverrides o;
  CHECK(o.empty());
  CHECK(o.For(1 << 20) == AllreduceAlgorithm::kAuto);
  o.Set(10, AllreduceAlgorithm::kRing);
  o.Set(3, AllreduceAlgorithm::kButterfly);
  CHECK(o.For(3 << 20) == AllreduceAlgorithm::kRing);
  CHECK(o.For(4 << 20) == AllreduceAlgorithm::kAuto);
  CHECK(o.For(100) == AllreduceAlgorithm::kButterfly);
  CHECK_EQ(o.Describe(), std::string("64B:butterfly 1MiB:ring"));
  CHECK_EQ(AlgorithmOverrides::FromPacked(o.packed()) == o, true);
  o.Set(10, AllreduceAlgorithm::kAuto);
  CHECK(o.For(1 << 20) == AllreduceAlgorithm::kAuto);
}

}  // namespace tfdist_test
