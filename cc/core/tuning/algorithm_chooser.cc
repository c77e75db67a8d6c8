#include "cc/core/tuning/algorithm_chooser.h"

#include <algorithm>
#include <utility>

namespace tfdist {

AlgorithmChooser::AlgorithmChooser(Model model, int trials)
    : model_(std::move(model)), trials_(trials < 0 ? 0 : trials) {}

int AlgorithmChooser::SizeClass(size_t bytes) {
  int c = 0;
  while (bytes > 1) {
    bytes >>= 1;
    ++c;
  }
  return c;
}

int AlgorithmChooser::RoundsFor(int trials, int size_class) {
  if (size_class >= 20) return trials;
  return size_class >= 16 ? 2 * trials : 4 * trials;
}

double AlgorithmChooser::TypicalSeconds(std::vector<double> seconds) {
  if (seconds.empty()) return 0.0;
  // The first call of a size pays for fresh pages and cold caches, and a
  // loaded machine only adds to a call: the slow end says little. The
  // fastest one says what a call can cost, not what it does.
  const auto at = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 5);
  std::nth_element(seconds.begin(), at, seconds.end());
  return *at;
}

AlgorithmChooser::Candidates AlgorithmChooser::Plausible(
    const std::vector<RankedAlgorithm>& ranked) {
  Candidates plausible;
  double pick_seconds = -1.0;
  for (const RankedAlgorithm& r : ranked) {
    if (pick_seconds < 0.0) pick_seconds = r.predicted_seconds;
    if (r.predicted_seconds <= kMaxPredictedRatio * pick_seconds) {
      plausible.push_back(r.algorithm);
    }
  }
  return plausible;
}

AlgorithmChooser::Class& AlgorithmChooser::ClassOf(size_t bytes) const {
  Class& c = classes_[static_cast<size_t>(SizeClass(bytes))];
  if (!c.seen) {
    // The class's candidates are the model's for the first size seen in it;
    // every rank sees the same first size (same collectives, same order).
    c.seen = true;
    c.candidates = model_(bytes);
    if (c.candidates.empty()) c.candidates.push_back(AllreduceAlgorithm::kButterfly);
    c.seconds.assign(c.candidates.size(), {});
    for (size_t i = 0; i < c.candidates.size(); ++i) c.visiting.push_back(i);
    c.rounds = RoundsFor(trials_, SizeClass(bytes));
    if (trials_ == 0 || c.candidates.size() == 1) {
      c.decided = true;
      c.chosen = c.candidates.front();
      c.fallback = c.chosen;
    }
  }
  return c;
}

size_t AlgorithmChooser::VisitedCandidate(const Class& c) {
  return c.visiting[static_cast<size_t>(c.trials_done / kCallsPerVisit) % c.visiting.size()];
}

std::vector<size_t> AlgorithmChooser::CloseContest(const Class& c) {
  if (c.candidates.size() < 2) return {};
  std::vector<size_t> order(c.candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: equal typical calls keep the model's order, as every rank does.
  std::stable_sort(order.begin(), order.end(), [&c](size_t a, size_t b) {
    return TypicalSeconds(c.seconds[a]) < TypicalSeconds(c.seconds[b]);
  });
  const double fastest = TypicalSeconds(c.seconds[order[0]]);
  const double second = TypicalSeconds(c.seconds[order[1]]);
  if (second > (1.0 + kRematchWindow) * fastest) return {};
  return {std::min(order[0], order[1]), std::max(order[0], order[1])};
}

AllreduceAlgorithm AlgorithmChooser::PickLocked(const Class& c) const {
  if (c.decided) return c.chosen;
  return c.candidates[VisitedCandidate(c)];
}

bool AlgorithmChooser::WantsLocked(const Class& c) const { return !c.decided; }

bool AlgorithmChooser::IsTrialLocked(const Class& c, AllreduceAlgorithm ran) const {
  return WantsLocked(c) && ran == PickLocked(c);
}

AllreduceAlgorithm AlgorithmChooser::Pick(size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return PickLocked(ClassOf(bytes));
}

AllreduceAlgorithm AlgorithmChooser::PickOtherThan(size_t bytes,
                                                  AllreduceAlgorithm unavailable) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Class& c = ClassOf(bytes);
  const AllreduceAlgorithm pick = PickLocked(c);
  if (pick != unavailable) return pick;
  if (c.decided && c.fallback != unavailable) return c.fallback;
  for (AllreduceAlgorithm candidate : c.candidates) {
    if (candidate != unavailable) return candidate;
  }
  // `unavailable` was the only candidate: any transport algorithm runs at
  // every size, and the butterfly is ClassOf's default too.
  return AllreduceAlgorithm::kButterfly;
}

bool AlgorithmChooser::Wants(size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return WantsLocked(ClassOf(bytes));
}

bool AlgorithmChooser::IsTrial(size_t bytes, AllreduceAlgorithm ran) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return IsTrialLocked(ClassOf(bytes), ran);
}

bool AlgorithmChooser::Decided(size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ClassOf(bytes).decided;
}

std::vector<std::pair<AllreduceAlgorithm, double>> AlgorithmChooser::TrialSeconds(
    size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Class& c = ClassOf(bytes);
  std::vector<std::pair<AllreduceAlgorithm, double>> seconds;
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    seconds.emplace_back(c.candidates[i], TypicalSeconds(c.seconds[i]));
  }
  return seconds;
}

void AlgorithmChooser::Report(size_t bytes, AllreduceAlgorithm algorithm,
                              double agreed_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  Class& c = ClassOf(bytes);
  if (!IsTrialLocked(c, algorithm)) return;
  const size_t count = c.candidates.size();
  const size_t which = VisitedCandidate(c);
  // A visit's first call pays what the previous candidate left behind.
  if (c.trials_done % kCallsPerVisit == kCallsPerVisit - 1) {
    c.seconds[which].push_back(agreed_seconds);
  }
  ++c.trials_done;
  if (static_cast<size_t>(c.trials_done) <
      c.visiting.size() * static_cast<size_t>(c.rounds) * kCallsPerVisit) {
    return;
  }
  if (!c.rematched) {
    c.rematched = true;
    std::vector<size_t> finalists = CloseContest(c);
    if (!finalists.empty()) {
      c.visiting = std::move(finalists);
      c.trials_done = 0;
      return;
    }
  }
  c.decided = true;
  const size_t chosen = Fastest(c, count);
  c.chosen = c.candidates[chosen];
  c.fallback = count > 1 ? c.candidates[Fastest(c, chosen)] : c.chosen;
}

size_t AlgorithmChooser::Fastest(const Class& c, size_t skip) {
  // The model's pick, or the fastest typical call if it beats the pick's by
  // more than kMargin; candidates[skip] takes no part.
  const size_t pick = skip == 0 ? 1 : 0;
  size_t fastest = pick;
  double fastest_seconds = TypicalSeconds(c.seconds[pick]);
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    if (i == skip) continue;
    const double seconds = TypicalSeconds(c.seconds[i]);
    if (seconds < fastest_seconds) {
      fastest = i;
      fastest_seconds = seconds;
    }
  }
  const bool beats_the_pick =
      fastest_seconds < (1.0 - kMargin) * TypicalSeconds(c.seconds[pick]);
  return beats_the_pick ? fastest : pick;
}

}  // namespace tfdist
