// Switching a traced step's gradient grouping under autotuning
// (gradient_groups_schedule.h, autotune_session.h): every rank must take
// the same branch at the same iteration, whichever side of the round that
// decided it each rank asks from, and the tuner may count a step only once
// the new grouping runs.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/runtime/autotune_session.h"
#include "cc/core/runtime/autotuner.h"
#include "cc/core/runtime/gradient_groups_schedule.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AutotuneSession;
using tfdist::GradientGroupsSchedule;
using tfdist::kTracedGroups;
using tfdist::TunedParameters;
using tfdist::TuningBroadcast;
using tfdist::TuningModel;
using tfdist::TuningPhase;

const std::vector<int32_t> kCandidates = {1, 2, 0};

TunedParameters Defaults() {
  TunedParameters p;
  p.fusion_threshold_bytes = uint64_t{64} << 20;
  p.cycle_time_ms = 1.0;
  return p;
}

}  // namespace

TFDIST_TEST(GradientGroupsScheduleRunsTheTracedGroupingUntilAChange) {
  GradientGroupsSchedule schedule;
  schedule.Register(kCandidates);
  schedule.Register({7, 8});  // later registrations are ignored
  CHECK_EQ(schedule.candidates() == kCandidates, true);
  for (int64_t i = 0; i < 5; ++i) CHECK_EQ(schedule.Ask(i, 1.0 * i), 0);
  CHECK_EQ(schedule.GroupsAt(100), kTracedGroups);
  CHECK_EQ(schedule.last_change_in_force_at(), -1.0);
}

TFDIST_TEST(GradientGroupsScheduleSwitchesAtTheNamedIteration) {
  GradientGroupsSchedule schedule;
  schedule.Register(kCandidates);
  for (int64_t i = 0; i <= 10; ++i) schedule.Ask(i, 0.0);
  // Two past the highest iteration asked: no rank, at most one step ahead,
  // has asked for it yet.
  CHECK_EQ(schedule.SafeIteration(), int64_t{12});
  schedule.Change(0, 12);
  CHECK_EQ(schedule.Ask(11, 1.0), 0);  // still the traced grouping
  CHECK_EQ(schedule.last_change_in_force_at(), -1.0);
  CHECK_EQ(schedule.Ask(12, 2.0), 2);  // num_groups 0 is candidate 2
  CHECK_EQ(schedule.last_change_in_force_at(), 2.0);
  CHECK_EQ(schedule.Ask(13, 3.0), 2);
  CHECK_EQ(schedule.last_change_in_force_at(), 2.0);  // the first step under it
  // Back to the traced grouping, then a value the step was not traced with.
  schedule.Change(kTracedGroups, schedule.SafeIteration());
  CHECK_EQ(schedule.Ask(15, 4.0), 0);
  schedule.Change(9, schedule.SafeIteration());
  CHECK_EQ(schedule.Ask(17, 5.0), 0);
  // A restored, earlier iteration gets what was in force then, on every rank.
  CHECK_EQ(schedule.GroupsAt(12), 0);
  CHECK_EQ(schedule.Ask(12, 6.0), 2);
  // The schedule's iterations never go back, even after an earlier one was asked.
  CHECK(schedule.SafeIteration() >= int64_t{17});
}

TFDIST_TEST(GradientGroupsAgreeAcrossRanksWhateverTheirLead) {
  // Rank 0 has asked up to iteration 9 when it encodes the round's words.
  // Until that round reaches it, rank 1 may have asked up to 10 (a rank is
  // at most one step ahead: a step's allreduces complete only once every
  // rank has submitted them), and rank 0 itself may ask 10. Whatever the
  // two did, at every iteration both take the same branch.
  const int64_t rank0_asked = 9;
  for (int64_t rank1_asked = rank0_asked - 1; rank1_asked <= rank0_asked + 1; ++rank1_asked) {
    for (int rank0_asks_again = 0; rank0_asks_again < 2; ++rank0_asks_again) {
      GradientGroupsSchedule rank0, rank1;
      rank0.Register(kCandidates);
      rank1.Register(kCandidates);
      std::vector<int> branch0(40, -1), branch1(40, -1);
      for (int64_t i = 0; i <= rank0_asked; ++i) branch0[i] = rank0.Ask(i, 0.0);
      const int64_t from = rank0.SafeIteration();  // rank 0 encodes the words
      int64_t next0 = rank0_asked + 1;
      if (rank0_asks_again) {
        branch0[next0] = rank0.Ask(next0, 0.0);
        ++next0;
      }
      for (int64_t i = 0; i <= rank1_asked; ++i) branch1[i] = rank1.Ask(i, 0.0);
      rank0.Change(2, from);  // the same round's words on both ranks
      rank1.Change(2, from);
      for (int64_t i = next0; i < 40; ++i) branch0[i] = rank0.Ask(i, 0.0);
      for (int64_t i = rank1_asked + 1; i < 40; ++i) branch1[i] = rank1.Ask(i, 0.0);
      for (int i = 0; i < 40; ++i) {
        CHECK_EQ_MSG(branch0[i], branch1[i], "iteration " << i << ", rank 1 had asked "
                                                << rank1_asked << ", rank 0 again "
                                                << rank0_asks_again);
      }
      CHECK_EQ(branch0[39], 1);  // num_groups 2 is candidate 1
      CHECK_EQ(branch0[rank0_asked + 1], 0);
    }
  }
}

TFDIST_TEST(GradientGroupsScheduleIsSafeAcrossThreads) {
  // The op asks from TensorFlow's threads while the runtime changes it.
  GradientGroupsSchedule schedule;
  schedule.Register(kCandidates);
  std::thread asker([&] {
    for (int64_t i = 0; i < 20000; ++i) {
      const int index = schedule.Ask(i, 1e-3 * static_cast<double>(i));
      CHECK(index >= 0 && index < 3);
    }
  });
  for (int k = 0; k < 200; ++k) schedule.Change(k % 2 ? 2 : 0, schedule.SafeIteration());
  asker.join();
}

TFDIST_TEST(AutotuneSessionStartsTheClockWhenTheNewGroupingRuns) {
  // Rank 0's session: a proposal that changes the grouping is not applied for
  // the tuner until a step asks for an iteration at or past the named one.
  TuningModel model;
  model.predict_seconds = [](size_t bytes) { return 1e-5 + 1e-9 * static_cast<double>(bytes); };
  AutotuneSession session(0, Defaults(), model);
  uint64_t round = 0;
  double now = 1.0;
  int64_t iteration = 0;
  TunedParameters apply;
  int index = 0;
  bool switched = false;
  // Steps of two grouped tensors named after the grouping in force, as the
  // traced branches name them.
  for (int step = 0; step < 200 && !switched; ++step) {
    index = session.AskGradientGroups(kCandidates, iteration++, now);
    for (int t = 0; t < 2; ++t) {
      now += 1e-3;
      std::vector<uint64_t> words = session.Words();
      if (session.OnRound(words, ++round, now, &apply) &&
          apply.gradient_groups != kTracedGroups) {
        // The grouping changes from a later iteration: this step and the next
        // still run the old one.
        TuningBroadcast b;
        CHECK(tfdist::DecodeTuning(words, &b));
        CHECK(b.groups_from_iteration > iteration - 1);
        CHECK_EQ(session.schedule().GroupsAt(iteration - 1), kTracedGroups);
        switched = true;
      }
      session.OnAllreduce("g" + std::to_string(index) + "." + std::to_string(t), 1024, now);
    }
  }
  CHECK(switched);
  CHECK_EQ(session.tuner()->phase() == TuningPhase::kGroups, true);
  const uint64_t generation = session.tuner()->generation();
  // Steps before the named iteration gather nothing for the trial: the
  // tuner's history stays at the baseline until the new grouping runs.
  const size_t before = session.tuner()->history().size();
  for (int step = 0; step < 40; ++step) {
    index = session.AskGradientGroups(kCandidates, iteration++, now);
    for (int t = 0; t < 2; ++t) {
      now += 1e-3;
      session.OnRound(session.Words(), ++round, now, &apply);
      session.OnAllreduce("g" + std::to_string(index) + "." + std::to_string(t), 1024, now);
    }
  }
  CHECK_EQ(index != 0 || session.tuner()->generation() != generation, true);
  CHECK(session.tuner()->history().size() > before);  // the trial was measured
}

TFDIST_TEST(AutotuneSessionWithoutCandidatesNeverRegroups) {
  TuningModel model;
  model.predict_seconds = [](size_t bytes) { return 1e-5 + 1e-9 * static_cast<double>(bytes); };
  AutotuneSession session(0, Defaults(), model);
  TunedParameters apply;
  double now = 1.0;
  for (uint64_t round = 1; round < 400; ++round) {
    now += 1e-3;
    if (session.OnRound(session.Words(), round, now, &apply)) {
      CHECK_EQ(apply.gradient_groups, kTracedGroups);
    }
    session.OnAllreduce("g" + std::to_string(round % 3), 1024, now);
  }
  CHECK(session.tuner()->done());
}

}  // namespace tfdist_test
