// "auto" that corrects itself: the cost model's pick, checked against the
// other plausible algorithms on the first calls of each size class, and the
// fastest kept.
//
// The model prices the algorithms as the calibration times them (direct
// calls). Through the runtime a call can cost more than that, and not alike
// for every algorithm (docs/cost_model.md, "auto on the user's path"): the
// ring's pipeline overlaps its reductions with its messages where the model
// prices them one after the other, and an unpinned job is scheduled
// differently from the calibration. Measured through tfdist.allreduce at
// np 2 and 3, the ring was 1.3-1.7x faster than the model's pick at 1-64 MiB
// while being neither its pick nor its runner-up. So the first calls of a
// size class (bytes rounded down to a power of two) go round the candidates
// (the model's ranking, cut where a prediction is kMaxPredictedRatio times
// the pick's), `trials` calls each, each call timed by its caller and the
// time agreed across the ranks (the slowest rank's, so every rank reports
// the same number); then the class keeps the one whose typical call was the
// fastest, for the rest of the job. Typical: the call a fifth of the way up
// from the fastest (TypicalSeconds), not the fastest itself. On two cores
// the ring's and Rabenseifner's calls of 1 MiB at np 2 ran 160 us at best and
// 350-440 us in nine calls of ten (timeline of one job), while the
// butterfly's ran 145-215 us: one lucky call decided for the slower one.
// Above the fifth, up to two cold first calls of five still do not count.
// Five calls each by default (RuntimeConfig::auto_trials): the ring's first
// two calls of a size cost 10-25x its later ones (np 2: 57-62 ms against
// 5 ms at 16 MiB, 220-260 ms against 10 ms at 64 MiB); with two calls each
// it lost to every algorithm it then beat by 1.5-2x, and with three it had
// one warm call against the others' two and lost some 16 MiB trials to a
// Rabenseifner 10-20% slower.
// The model's pick keeps the class unless another beats it by kMargin.
//
// A close contest is played again: when the two fastest candidates' typical
// calls are within kRematchWindow of each other, those two alone get as many
// visits again, and the choice is made on all their calls together. Five
// calls each decided wrongly where the two differed by 10-20% and a call's
// time varies by more (np 4 on two cores, 16 MiB: the trials kept
// Rabenseifner where the ring forced took 0.82 of its time; np 2, 16 MiB,
// one job of three). A rematch costs at most kRematchWindow of a call per
// extra call, once per size class and job.
//
// The trials visit the candidates in turn, kCallsPerVisit calls at a time,
// and time only the last call of each visit. A call can leave part of its
// cost to the next one: at np 2, 1 MiB, in jobs where the machine was in its
// slow mode, a ring or Rabenseifner call followed by anything cost that next
// call about 200 us more, and a butterfly call did not (back to back: ring
// and Rabenseifner 385-400 us a call, the butterfly 190-205). Trials that
// changed candidate on every call charged each one's leftover to the next
// candidate in the turn: they timed Rabenseifner (which followed the
// butterfly) at 185-203 us and the butterfly at 397-403, and kept the
// slowest. A visit's first call takes the previous candidate's leftover and
// its second pays its own, as a user's stream of calls of one size does:
// timed that way, 190-205 us for the butterfly and 384-403 for the others.
//
// Every rank must run the same algorithm on every call: the chooser decides
// only from what it is told (the model's candidates and agreed seconds), in
// the order it is told, which is the same on every rank because every rank
// runs the same collectives in the same order. Pick() does not change the
// state, so it may be asked any number of times per call (and from another
// thread: tfdist.algorithm_for); only Report() moves a class on.
#ifndef TFDIST_CORE_TUNING_ALGORITHM_CHOOSER_H_
#define TFDIST_CORE_TUNING_ALGORITHM_CHOOSER_H_

#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/tuning/cost_model.h"

namespace tfdist {

class AlgorithmChooser {
 public:
  // The algorithms to time for a size, the model's pick first (the same on
  // every rank). One entry, or none, means there is nothing to compare.
  using Candidates = std::vector<AllreduceAlgorithm>;
  using Model = std::function<Candidates(size_t bytes)>;

  // `trials`: timed calls of each candidate before a class is decided (each
  // after an untimed one: kCallsPerVisit), as many again for the two of a
  // close contest (kRematchWindow); 0
  // trusts the model (Pick is then the model's pick, Wants() always false).
  AlgorithmChooser(Model model, int trials);

  // The algorithm to run an "auto" allreduce of `bytes` with now.
  AllreduceAlgorithm Pick(size_t bytes) const;
  // The same for a call that cannot run `unavailable` (the "mpi" candidate
  // for a type MPI does not reduce): Pick(bytes) where that is another
  // algorithm; else, once decided, the fastest of the other candidates by
  // the same rule as the choice, and during the trials the model's pick. A
  // call given this fallback is not a trial (Wants is about Pick).
  AllreduceAlgorithm PickOtherThan(size_t bytes, AllreduceAlgorithm unavailable) const;
  // Whether a call of `bytes` run with Pick(bytes) is a trial: the caller
  // times it, agrees the time across ranks and Report()s it.
  bool Wants(size_t bytes) const;
  // Whether a call of `bytes` that ran `ran` is a trial: Wants(bytes), and
  // `ran` is Pick(bytes) (not PickOtherThan's fallback). Report() takes only
  // such calls.
  bool IsTrial(size_t bytes, AllreduceAlgorithm ran) const;
  // One trial's seconds, agreed across ranks (every rank passes the same
  // number), for a call of `bytes` that ran `algorithm`. Ignored unless it
  // is the trial the class waits for.
  void Report(size_t bytes, AllreduceAlgorithm algorithm, double agreed_seconds);
  // Whether the class of `bytes` has made its choice (for the tests and the
  // debug log).
  bool Decided(size_t bytes) const;
  // The class's candidates and each one's typical trial call so far
  // (TypicalSeconds), in seconds (0 before its first): what the debug log
  // prints on a decision.
  std::vector<std::pair<AllreduceAlgorithm, double>> TrialSeconds(size_t bytes) const;

  // The size class of `bytes`: floor(log2(bytes)), 0 for 0 and 1.
  static int SizeClass(size_t bytes);
  // Calls of each candidate in a class's trials: `trials` from 1 MiB up,
  // twice that from 64 KiB, four times below. A call's time on a shared
  // machine varies by more than the algorithms differ at small sizes, and
  // the typical one of more calls is a steadier estimate; those calls are cheap
  // (a 4 x 10-call trial of 64 KiB costs a few ms once per job).
  static int RoundsFor(int trials, int size_class);
  // What a candidate's trial calls say it costs: the call at index n / 5 of
  // the n calls sorted fastest first (the fastest of up to four, the second
  // of five to nine, ...); 0 for none.
  static double TypicalSeconds(std::vector<double> seconds);

  // The candidates to time among the model's ranking (RankAllreduce,
  // fastest predicted first, which never offers the tree at P = 2): those
  // predicted within kMaxPredictedRatio of the pick, in the model's order.
  static Candidates Plausible(const std::vector<RankedAlgorithm>& ranked);

  // Consecutive trial calls of one candidate; only the last is timed.
  static constexpr int kCallsPerVisit = 2;
  // A trial is won only by this margin: near-ties keep the model's pick.
  static constexpr double kMargin = 0.03;
  // The two fastest candidates play again when the slower one's typical call
  // is within this fraction of the faster one's.
  static constexpr double kRematchWindow = 0.25;
  // Candidates predicted this many times slower than the pick are not timed:
  // the model has been off by up to 1.7x on the user's path, not by more.
  static constexpr double kMaxPredictedRatio = 3.0;

 private:
  struct Class {
    bool seen = false;
    Candidates candidates;
    int rounds = 0;  // RoundsFor(trials_, class)
    // The candidates (indices) the current phase visits in turn: all of
    // them, then the rematch's two.
    std::vector<size_t> visiting;
    bool rematched = false;
    int trials_done = 0;  // calls reported in this phase; the visit is
                          // trials_done / kCallsPerVisit % visiting.size()
    std::vector<std::vector<double>> seconds;  // per candidate, its calls
    bool decided = false;
    AllreduceAlgorithm chosen{};
    AllreduceAlgorithm fallback{};  // the choice among the others (PickOtherThan)
  };
  // The candidate the finished trials keep, leaving out candidates[skip]
  // (none: skip >= candidates.size()).
  static size_t Fastest(const Class& c, size_t skip);
  // The class's state, seeded with the model's candidates on first use.
  Class& ClassOf(size_t bytes) const;
  // The index of the candidate whose visit the class's trials are in.
  static size_t VisitedCandidate(const Class& c);
  // The two fastest candidates (in the model's order) where a rematch is
  // due, else none.
  static std::vector<size_t> CloseContest(const Class& c);
  AllreduceAlgorithm PickLocked(const Class& c) const;
  bool WantsLocked(const Class& c) const;
  bool IsTrialLocked(const Class& c, AllreduceAlgorithm ran) const;

  Model model_;
  int trials_;
  mutable std::mutex mutex_;
  mutable std::array<Class, 65> classes_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_ALGORITHM_CHOOSER_H_
