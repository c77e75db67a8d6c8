// AlgorithmChooser: trials go round the model's candidates, two calls at a
// time of which the second is timed, the fastest (by a margin over the pick)
// is kept per size class, and what it decides depends only on what it was
// told, so ranks told alike pick alike.
#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "cc/core/runtime/config.h"
#include "cc/core/tuning/algorithm_chooser.h"
#include "cc/core/tuning/cost_model.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AlgorithmChooser;
using tfdist::AllreduceAlgorithm;

constexpr AllreduceAlgorithm kRabe = AllreduceAlgorithm::kRabenseifner;
constexpr AllreduceAlgorithm kRing = AllreduceAlgorithm::kRing;
constexpr AllreduceAlgorithm kButterfly = AllreduceAlgorithm::kButterfly;
constexpr AllreduceAlgorithm kTree = AllreduceAlgorithm::kTree;
constexpr AllreduceAlgorithm kMpi = AllreduceAlgorithm::kMpi;

// The model of issue 25 at P = 2: Rabenseifner first, the ring second.
AlgorithmChooser::Candidates RabenseifnerThenRing(size_t) { return {kRabe, kRing}; }

// Runs one call of `bytes` as a rank would: asks, and reports `seconds` of
// whatever it ran when the call is a trial. Returns what it ran.
AllreduceAlgorithm Call(AlgorithmChooser& chooser, size_t bytes, double rabe_seconds,
                        double ring_seconds) {
  const AllreduceAlgorithm ran = chooser.Pick(bytes);
  if (chooser.Wants(bytes)) {
    chooser.Report(bytes, ran, ran == kRabe ? rabe_seconds : ring_seconds);
  }
  return ran;
}

// Replays a class's trials of `bytes`: both calls of Rabenseifner's i-th visit
// report rabe[i], of the ring's ring[i]. Returns how many visits of each
// (Rabenseifner, ring) the trials made; at most `visits_each` of each are given.
std::pair<int, int> ReplayTrials(AlgorithmChooser& chooser, size_t bytes, const double* rabe,
                                 const double* ring, int visits_each) {
  int call[2] = {0, 0};
  while (chooser.Wants(bytes)) {
    const AllreduceAlgorithm ran = chooser.Pick(bytes);
    const int which = ran == kRabe ? 0 : 1;
    const int visit = call[which]++ / AlgorithmChooser::kCallsPerVisit;
    CHECK(visit < visits_each);
    if (visit >= visits_each) break;
    chooser.Report(bytes, ran, (which == 0 ? rabe : ring)[visit]);
  }
  return {call[0] / AlgorithmChooser::kCallsPerVisit, call[1] / AlgorithmChooser::kCallsPerVisit};
}

}  // namespace

TFDIST_TEST(AlgorithmChooserKeepsTheFasterOfPickAndRunnerUp) {
  AlgorithmChooser chooser(RabenseifnerThenRing, 2);
  const size_t mib = 1 << 20;
  // Trials alternate pick, runner-up, pick, runner-up, two calls each time.
  std::vector<AllreduceAlgorithm> ran;
  for (int i = 0; i < 8; ++i) ran.push_back(Call(chooser, mib, 310e-6, 205e-6));
  CHECK(ran == (std::vector<AllreduceAlgorithm>{kRabe, kRabe, kRing, kRing, kRabe, kRabe,
                                                kRing, kRing}));
  CHECK(chooser.Decided(mib));
  CHECK(!chooser.Wants(mib));
  // The ring was faster: the class keeps it, for every size in the class.
  for (int i = 0; i < 3; ++i) CHECK(Call(chooser, mib, 1e-9, 1.0) == kRing);
  CHECK(chooser.Pick(mib + 12345) == kRing);
  // Another class starts its own trials with the model's pick.
  CHECK(!chooser.Decided(4 * mib));
  CHECK(chooser.Pick(4 * mib) == kRabe);
}

TFDIST_TEST(AlgorithmChooserKeepsThePickInANearTieOrWhenItWins) {
  AlgorithmChooser tie(RabenseifnerThenRing, 2);
  // The runner-up 2% faster: within the margin, the model's pick stays.
  // So close a contest is played twice (a rematch of the two).
  const size_t mib = 1 << 20;
  int calls = 0;
  for (; tie.Wants(mib); ++calls) Call(tie, mib, 100e-6, 98e-6);
  CHECK_EQ(calls, 16);
  CHECK(tie.Pick(mib) == kRabe);
  AlgorithmChooser wins(RabenseifnerThenRing, 3);
  for (int i = 0; i < 12; ++i) Call(wins, mib, 50e-6, 80e-6);
  CHECK(wins.Pick(mib) == kRabe);
}

TFDIST_TEST(AlgorithmChooserComparesTheFastestCallOfEachOfFewCalls) {
  // The first call of each pays for cold pages; a slow outlier must not
  // decide. Pick: 900, 100 µs (best 100); runner-up: 140, 130 (best 130,
  // too far behind for a rematch). Each visit's first call (1 s here) is not
  // timed.
  AlgorithmChooser chooser(RabenseifnerThenRing, 2);
  const double seconds[] = {1.0, 900e-6, 1.0, 140e-6, 1.0, 100e-6, 1.0, 130e-6};
  for (double s : seconds) {
    const AllreduceAlgorithm ran = chooser.Pick(1 << 20);
    chooser.Report(1 << 20, ran, s);
  }
  CHECK(chooser.Decided(1 << 20));
  CHECK(chooser.Pick(1 << 20) == kRabe);
  // What the debug log prints: each candidate, the pick first, with its
  // typical call (of two calls, the fastest).
  const auto fastest = chooser.TrialSeconds(1 << 20);
  CHECK(fastest.size() == 2);
  CHECK(fastest[0].first == kRabe && fastest[0].second == 100e-6);
  CHECK(fastest[1].first == kRing && fastest[1].second == 130e-6);
}

TFDIST_TEST(AlgorithmChooserRingWithTwoColdCallsWinsWithTheDefaultTrials) {
  // The ring's first two calls of a size are cold (15 and 74 ms against 3.8 ms
  // at 16 MiB, np 2), Rabenseifner's first only. Both fall in the ring's first
  // visit, which times one of them; replayed here as two cold visits, worse.
  // With the default five timed calls each the ring still has three warm
  // ones and wins by what it is faster; 4.0 against 4.62 ms is close enough
  // for a rematch, five warm calls more each.
  AlgorithmChooser chooser(RabenseifnerThenRing, tfdist::RuntimeConfig().auto_trials);
  const size_t bytes = 16 << 20;
  const double rabe[] = {21.7e-3, 4.75e-3, 4.79e-3, 4.40e-3, 4.62e-3,
                         4.50e-3, 4.60e-3, 4.70e-3, 4.45e-3, 4.80e-3};
  const double ring[] = {14.9e-3, 74.0e-3, 5.1e-3, 3.8e-3, 4.0e-3,
                         3.9e-3, 4.1e-3, 3.85e-3, 4.0e-3, 4.2e-3};
  CHECK(ReplayTrials(chooser, bytes, rabe, ring, 10) == std::make_pair(10, 10));
  CHECK(chooser.Pick(bytes) == kRing);
}

TFDIST_TEST(AlgorithmChooserIsNotDecidedByOneLuckyCall) {
  // One job at np 2, 1 MiB (timeline): the ring ran 160 us once and 350-440 us
  // otherwise; the butterfly 145-215 us. The ring's lucky call must not win.
  AlgorithmChooser chooser(RabenseifnerThenRing, 5);  // the ring as the challenger
  const size_t bytes = 1 << 20;
  const double steady[] = {176e-6, 160e-6, 167e-6, 172e-6, 213e-6};
  const double lucky[] = {417e-6, 150e-6, 364e-6, 437e-6, 353e-6};
  CHECK(ReplayTrials(chooser, bytes, steady, lucky, 5) == std::make_pair(5, 5));
  CHECK(chooser.Pick(bytes) == kRabe);
  const auto typical = chooser.TrialSeconds(bytes);
  CHECK(typical[0].second == 167e-6 && typical[1].second == 353e-6);
  // And the other way round: the steady one wins when it is the challenger.
  AlgorithmChooser other(RabenseifnerThenRing, 5);
  CHECK(ReplayTrials(other, bytes, lucky, steady, 5) == std::make_pair(5, 5));
  CHECK(other.Pick(bytes) == kRing);
}

TFDIST_TEST(AlgorithmChooserTypicalSecondsIsTheFifthFromTheFastest) {
  CHECK(AlgorithmChooser::TypicalSeconds({}) == 0.0);
  CHECK(AlgorithmChooser::TypicalSeconds({3.0}) == 3.0);
  CHECK(AlgorithmChooser::TypicalSeconds({4.0, 1.0, 3.0, 2.0}) == 1.0);
  CHECK(AlgorithmChooser::TypicalSeconds({5.0, 4.0, 1.0, 3.0, 2.0}) == 2.0);
  std::vector<double> twenty;
  for (int i = 20; i >= 1; --i) twenty.push_back(i);
  CHECK(AlgorithmChooser::TypicalSeconds(twenty) == 5.0);
}

TFDIST_TEST(AlgorithmChooserIgnoresReportsOfOtherAlgorithms) {
  // A report for an algorithm that was not the trial's (a forced call of the
  // same size, say) must not count as a trial.
  AlgorithmChooser chooser(RabenseifnerThenRing, 1);
  chooser.Report(4096, kRing, 1e-9);
  CHECK(chooser.Pick(4096) == kRabe);
  CHECK(!chooser.Decided(4096));
}

TFDIST_TEST(AlgorithmChooserWithoutTrialsIsTheModel) {
  AlgorithmChooser chooser(RabenseifnerThenRing, 0);
  CHECK(chooser.Decided(1 << 20));
  CHECK(!chooser.Wants(1 << 20));
  CHECK(chooser.Pick(1 << 20) == kRabe);
  // One candidate only: nothing to compare either.
  AlgorithmChooser single([](size_t) { return AlgorithmChooser::Candidates{kRing}; }, 2);
  CHECK(!single.Wants(100));
  CHECK(single.Pick(100) == kRing);
}

TFDIST_TEST(AlgorithmChooserRanksToldAlikeChooseAlike) {
  // Two ranks measure different local times, but report the agreed (max)
  // time: they run the same algorithm on every call.
  AlgorithmChooser a(RabenseifnerThenRing, 2), b(RabenseifnerThenRing, 2);
  const double local_a[] = {1.0, 300e-6, 1.0, 200e-6, 1.0, 310e-6, 1.0, 190e-6, 5e-6, 5e-6};
  const double local_b[] = {1.0, 320e-6, 1.0, 150e-6, 1.0, 280e-6, 1.0, 260e-6, 9e-6, 9e-6};
  for (int i = 0; i < 10; ++i) {
    const AllreduceAlgorithm ran_a = a.Pick(1 << 20), ran_b = b.Pick(1 << 20);
    CHECK(ran_a == ran_b);
    const double agreed = std::max(local_a[i], local_b[i]);
    if (a.Wants(1 << 20)) a.Report(1 << 20, ran_a, agreed);
    if (b.Wants(1 << 20)) b.Report(1 << 20, ran_b, agreed);
  }
  CHECK(a.Pick(1 << 20) == b.Pick(1 << 20));
  CHECK(a.Pick(1 << 20) == kRing);  // 200 (agreed) against 310
}

TFDIST_TEST(AlgorithmChooserTimesCheapSizesMoreOften) {
  CHECK(AlgorithmChooser::RoundsFor(3, 26) == 3);
  CHECK(AlgorithmChooser::RoundsFor(3, 20) == 3);
  CHECK(AlgorithmChooser::RoundsFor(3, 19) == 6);
  CHECK(AlgorithmChooser::RoundsFor(3, 16) == 6);
  CHECK(AlgorithmChooser::RoundsFor(3, 15) == 12);
  CHECK(AlgorithmChooser::RoundsFor(0, 2) == 0);
  // 4 KiB with 2 trials: 8 timed calls of each of the two (16 calls each, with
  // the visits' first calls) before the class decides (no rematch: 60 is
  // more than kRematchWindow behind 40).
  AlgorithmChooser chooser(RabenseifnerThenRing, 2);
  int calls = 0;
  while (chooser.Wants(4096)) {
    Call(chooser, 4096, 60e-6, 40e-6);
    ++calls;
  }
  CHECK_EQ(calls, 32);
  CHECK(chooser.Pick(4096) == kRing);
}

TFDIST_TEST(AlgorithmChooserPlaysACloseContestAgain) {
  // Three candidates; Rabenseifner and the ring within 1% in the first
  // round of visits, the butterfly far behind. The rematch visits those two
  // only, and the choice is made on all their calls: here the ring's rematch
  // calls are faster (the machine left a slow stretch), and it wins.
  AlgorithmChooser chooser(
      [](size_t) { return AlgorithmChooser::Candidates{kRabe, kRing, kButterfly}; }, 2);
  const size_t bytes = 16 << 20;
  std::vector<AllreduceAlgorithm> ran;
  while (chooser.Wants(bytes)) {
    const AllreduceAlgorithm a = chooser.Pick(bytes);
    const bool rematch = ran.size() >= 12;
    ran.push_back(a);
    chooser.Report(bytes, a, a == kButterfly ? 9e-3 : a == kRabe ? (rematch ? 5.5e-3 : 5.0e-3)
                                                                  : (rematch ? 4.0e-3 : 5.05e-3));
  }
  CHECK(ran == (std::vector<AllreduceAlgorithm>{
                   kRabe, kRabe, kRing, kRing, kButterfly, kButterfly,
                   kRabe, kRabe, kRing, kRing, kButterfly, kButterfly,
                   kRabe, kRabe, kRing, kRing, kRabe, kRabe, kRing, kRing}));
  CHECK(chooser.Pick(bytes) == kRing);
  const auto typical = chooser.TrialSeconds(bytes);
  CHECK(typical[0].second == 5.0e-3 && typical[1].second == 4.0e-3);
}

TFDIST_TEST(AlgorithmChooserRematchMakesFewerWrongChoicesUnderNoise) {
  // Generated contests: the pick's true call time 1.0, the challenger's 1.1
  // or 1.2 (the challenger slower) or 0.83-0.91 (faster); each call's time
  // is its true one times a spread of 0-30%, and one call in four is
  // descheduled (2-3x). The same calls replayed to a chooser and to a
  // reference that decides on the first round of visits alone (the rule
  // before rematches: TypicalSeconds, kMargin for the pick). The rematch
  // must choose the truly faster one more often, and never less often for
  // any ratio.
  std::mt19937 generator(25);
  std::uniform_real_distribution<double> spread(0.0, 0.3), unit(0.0, 1.0);
  const double ratios[] = {1.1, 1.2, 1.0 / 1.1, 1.0 / 1.2};
  const size_t bytes = 16 << 20;
  const int trials = tfdist::RuntimeConfig().auto_trials;
  int wrong_total = 0, reference_wrong_total = 0;
  for (double ratio : ratios) {
    int wrong = 0, reference_wrong = 0;
    for (int contest = 0; contest < 400; ++contest) {
      AlgorithmChooser chooser(RabenseifnerThenRing, trials);
      std::vector<double> first_round[2];
      int calls = 0;
      while (chooser.Wants(bytes)) {
        const AllreduceAlgorithm a = chooser.Pick(bytes);
        const bool descheduled = unit(generator) < 0.25;
        const double seconds = (a == kRabe ? 1.0 : ratio) * (1.0 + spread(generator)) *
                               (descheduled ? 2.0 + unit(generator) : 1.0);
        // The first round of visits: 2 candidates x `trials` visits x 2 calls,
        // the second call of each visit timed.
        ++calls;
        if (calls <= 2 * trials * AlgorithmChooser::kCallsPerVisit &&
            calls % AlgorithmChooser::kCallsPerVisit == 0) {
          first_round[a == kRabe ? 0 : 1].push_back(seconds);
        }
        chooser.Report(bytes, a, seconds);
      }
      const AllreduceAlgorithm truly_faster = ratio < 1.0 ? kRing : kRabe;
      const double pick = AlgorithmChooser::TypicalSeconds(first_round[0]);
      const double challenger = AlgorithmChooser::TypicalSeconds(first_round[1]);
      const AllreduceAlgorithm reference =
          challenger < (1.0 - AlgorithmChooser::kMargin) * pick ? kRing : kRabe;
      wrong += chooser.Pick(bytes) != truly_faster;
      reference_wrong += reference != truly_faster;
    }
    CHECK_MSG(wrong <= reference_wrong, "ratio " << ratio << ": " << wrong << " wrong with "
              "the rematch, " << reference_wrong << " without, of 400");
    wrong_total += wrong;
    reference_wrong_total += reference_wrong;
  }
  CHECK_MSG(wrong_total < reference_wrong_total,
            wrong_total << " wrong with the rematch, " << reference_wrong_total << " without");
}

TFDIST_TEST(AlgorithmChooserSizeClassesArePowersOfTwo) {
  CHECK(AlgorithmChooser::SizeClass(0) == 0);
  CHECK(AlgorithmChooser::SizeClass(1) == 0);
  CHECK(AlgorithmChooser::SizeClass(4) == 2);
  CHECK(AlgorithmChooser::SizeClass(7) == 2);
  CHECK(AlgorithmChooser::SizeClass(1 << 20) == 20);
  CHECK(AlgorithmChooser::SizeClass((1 << 21) - 1) == 20);
  CHECK(AlgorithmChooser::SizeClass(~size_t{0}) == 63);
}

TFDIST_TEST(AlgorithmChooserFindsAFasterAlgorithmBeyondTheRunnerUp) {
  // Issue 25 at P = 3: the model ranks tree, butterfly, Rabenseifner, ring;
  // the ring, last, is the fastest through the runtime.
  AlgorithmChooser chooser(
      [](size_t) { return AlgorithmChooser::Candidates{kTree, kButterfly, kRabe, kRing}; }, 2);
  const size_t bytes = 64 << 20;
  auto seconds = [&](AllreduceAlgorithm a) {
    return a == kRing ? 30e-3 : a == kTree ? 48e-3 : a == kRabe ? 52e-3 : 58e-3;
  };
  std::vector<AllreduceAlgorithm> ran;
  while (chooser.Wants(bytes)) {
    const AllreduceAlgorithm a = chooser.Pick(bytes);
    ran.push_back(a);
    chooser.Report(bytes, a, seconds(a));
  }
  // Round the candidates, twice, two calls a visit: every candidate is timed as
  // often, and visits alternate (a drift in the machine's speed spreads over all).
  CHECK(ran == (std::vector<AllreduceAlgorithm>{
                   kTree, kTree, kButterfly, kButterfly, kRabe, kRabe, kRing, kRing,
                   kTree, kTree, kButterfly, kButterfly, kRabe, kRabe, kRing, kRing}));
  CHECK(chooser.Pick(bytes) == kRing);
}

TFDIST_TEST(AlgorithmChooserChargesACallWhatItLeavesToTheNext) {
  // np 2, 1 MiB, a slow-mode job: a ring or Rabenseifner call adds about 200 us
  // to whatever call comes next, a butterfly call nothing. Back to back the
  // butterfly costs 190 us a call and the others about 390. Each call's time
  // here is its own cost plus what the previous call (of any algorithm) left.
  AlgorithmChooser chooser(
      [](size_t) { return AlgorithmChooser::Candidates{kRabe, kRing, kButterfly}; }, 5);
  const size_t bytes = 1 << 20;
  auto own = [](AllreduceAlgorithm a) {
    return a == kButterfly ? 190e-6 : a == kRing ? 180e-6 : 185e-6;
  };
  auto leaves = [](AllreduceAlgorithm a) { return a == kButterfly ? 0.0 : 205e-6; };
  AllreduceAlgorithm previous = kButterfly;
  while (chooser.Wants(bytes)) {
    const AllreduceAlgorithm a = chooser.Pick(bytes);
    chooser.Report(bytes, a, own(a) + leaves(previous));
    previous = a;
  }
  // Changing candidate on every call would have timed Rabenseifner at 185 us
  // (it follows the butterfly) and kept it.
  CHECK(chooser.Pick(bytes) == kButterfly);
  const auto typical = chooser.TrialSeconds(bytes);
  CHECK(std::abs(typical[0].second - 390e-6) < 1e-9);
  CHECK(std::abs(typical[1].second - 385e-6) < 1e-9);
  CHECK(std::abs(typical[2].second - 190e-6) < 1e-9);
}

TFDIST_TEST(AlgorithmChooserFallsBackWhereItsPickCannotRun) {
  // The executor offers MPI_Allreduce last; a call in a type MPI does not
  // reduce asks for anything else (PickOtherThan). Here MPI is the fastest
  // and the butterfly the fastest of the rest.
  AlgorithmChooser chooser(
      [](size_t) { return AlgorithmChooser::Candidates{kRing, kButterfly, kMpi}; }, 2);
  const size_t bytes = 4 << 20;
  auto seconds = [](AllreduceAlgorithm a) {
    return a == kMpi ? 400e-6 : a == kButterfly ? 450e-6 : 500e-6;
  };
  int other_calls = 0;
  while (chooser.Wants(bytes)) {
    const AllreduceAlgorithm a = chooser.Pick(bytes);
    if (a == kMpi && other_calls < 3) {
      // During MPI's visit a call that cannot run it runs the model's pick,
      // is no trial, and leaves the visit where it was.
      CHECK(chooser.PickOtherThan(bytes, kMpi) == kRing);
      CHECK(!chooser.IsTrial(bytes, kRing) && chooser.IsTrial(bytes, kMpi));
      chooser.Report(bytes, kRing, 1e-9);
      ++other_calls;
      CHECK(chooser.Pick(bytes) == kMpi);
      continue;
    }
    CHECK(chooser.PickOtherThan(bytes, kMpi) == (a == kMpi ? kRing : a));
    chooser.Report(bytes, a, seconds(a));
  }
  CHECK(other_calls == 3);
  CHECK(chooser.Pick(bytes) == kMpi);
  CHECK(chooser.PickOtherThan(bytes, kMpi) == kButterfly);
  CHECK(chooser.PickOtherThan(bytes, kRing) == kMpi);

  // The fallback keeps the model's pick in a near tie, as the choice does.
  AlgorithmChooser near_tie(
      [](size_t) { return AlgorithmChooser::Candidates{kRing, kButterfly, kMpi}; }, 2);
  while (near_tie.Wants(bytes)) {
    const AllreduceAlgorithm a = near_tie.Pick(bytes);
    near_tie.Report(bytes, a, a == kMpi ? 300e-6 : a == kButterfly ? 495e-6 : 500e-6);
  }
  CHECK(near_tie.Pick(bytes) == kMpi);
  CHECK(near_tie.PickOtherThan(bytes, kMpi) == kRing);

  // MPI alone (decided at once): a call that cannot run it still runs.
  AlgorithmChooser mpi_alone([](size_t) { return AlgorithmChooser::Candidates{kMpi}; }, 2);
  CHECK(mpi_alone.Decided(bytes));
  CHECK(mpi_alone.PickOtherThan(bytes, kMpi) == kButterfly);
}

TFDIST_TEST(PlausibleCutsAtThreeTimesThePick) {
  using Ranked = std::vector<tfdist::RankedAlgorithm>;
  // The model's order is kept; a prediction over 3x the pick's is cut.
  const Ranked ranked = {{kButterfly, 1.0}, {kRabe, 1.2}, {kTree, 2.9}, {kRing, 3.1}};
  CHECK(AlgorithmChooser::Plausible(ranked) ==
        (AlgorithmChooser::Candidates{kButterfly, kRabe, kTree}));
  const Ranked tree_first = {{kTree, 1.0}, {kButterfly, 1.5}, {kRing, 4.0}, {kRabe, 5.0}};
  CHECK(AlgorithmChooser::Plausible(tree_first) ==
        (AlgorithmChooser::Candidates{kTree, kButterfly}));
  CHECK(AlgorithmChooser::Plausible({}).empty());
}

TFDIST_TEST(TheModelNeverOffersTheTreeAtTwoRanks) {
  auto has_tree = [&](const std::vector<tfdist::RankedAlgorithm>& ranked) {
    return std::any_of(ranked.begin(), ranked.end(),
                       [&](const tfdist::RankedAlgorithm& r) { return r.algorithm == kTree; });
  };
  // A calibration that prices an exchange (and a ring step) far above two
  // hops: the tree's reduce and broadcast would then be predicted the
  // fastest, at two ranks and at three.
  tfdist::StepCosts skewed = tfdist::StepCosts::FromLinkCost({2e-6, 1e-10});
  for (tfdist::StepKind kind : {tfdist::StepKind::kExchange, tfdist::StepKind::kExchangeReduce,
                                tfdist::StepKind::kRing}) {
    skewed.at(kind) = tfdist::CostCurve::Linear(1e-3, 1e-8);
  }
  for (const tfdist::NetworkCost& network :
       {tfdist::UniformNetwork({2e-6, 1e-10}), tfdist::UniformNetwork(skewed)}) {
    for (size_t bytes = 4; bytes <= (size_t{1} << 28); bytes <<= 2) {
      const auto two = tfdist::RankAllreduce(tfdist::HostLayout(2), bytes, network);
      CHECK_EQ_MSG(two.size(), size_t{3}, bytes);
      CHECK_EQ_MSG(has_tree(two), false, bytes);
      CHECK(tfdist::ChooseAllreduce(tfdist::HostLayout(2), bytes, network) != kTree);
      // Forced, it is still priced.
      CHECK(std::isfinite(
          tfdist::PredictAllreduceSeconds(kTree, tfdist::HostLayout(2), bytes, network)));
    }
  }
  // The skewed calibration does make the model rank the tree first at three
  // ranks, where it stays on offer: so the guard above is what keeps it out.
  const auto three = tfdist::RankAllreduce(tfdist::HostLayout(3), 1 << 20,
                                           tfdist::UniformNetwork(skewed));
  CHECK(three.front().algorithm == kTree);
}

TFDIST_TEST(RankAllreduceOrdersEveryAlgorithmByPrediction) {
  const tfdist::LinkCost link = {2e-6, 1e-10};
  for (int size : {2, 3, 4, 8}) {
    for (size_t bytes : {size_t{4}, size_t{1} << 16, size_t{1} << 24}) {
      const tfdist::NetworkCost network = tfdist::UniformNetwork(link);
      const tfdist::HostLayout layout(size);
      const auto ranked = tfdist::RankAllreduce(layout, bytes, network);
      // One host: every flat algorithm (but the tree at two ranks), no hierarchical.
      CHECK(ranked.size() == (size == 2 ? 3u : 4u));
      CHECK(ranked.front().algorithm == tfdist::ChooseAllreduce(layout, bytes, network));
      for (size_t i = 0; i < ranked.size(); ++i) {
        CHECK(ranked[i].predicted_seconds == tfdist::PredictAllreduceSeconds(
                                                 ranked[i].algorithm, layout, bytes, network));
        if (i > 0) CHECK(ranked[i - 1].predicted_seconds <= ranked[i].predicted_seconds);
        CHECK(ranked[i].algorithm != AllreduceAlgorithm::kHierarchical);
      }
    }
  }
  // Two hosts of two ranks: hierarchical is a candidate too.
  const auto two_hosts = tfdist::RankAllreduce(tfdist::HostLayout::Consecutive(4, 2), 1 << 20,
                                               tfdist::UniformNetwork(link));
  CHECK(two_hosts.size() == 5);
  CHECK(std::any_of(two_hosts.begin(), two_hosts.end(), [](const tfdist::RankedAlgorithm& r) {
    return r.algorithm == AllreduceAlgorithm::kHierarchical;
  }));
  CHECK(tfdist::RankAllreduce(tfdist::HostLayout(1), 1024,
                              tfdist::UniformNetwork(link)).empty());
}

}  // namespace tfdist_test
