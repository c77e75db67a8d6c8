#include "cc/core/runtime/stall_inspector.h"

#include <algorithm>

#include "cc/core/runtime/validation.h"

namespace tfdist {

namespace {

double Seconds(StallInspector::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

StallInspector::StallInspector(double check_seconds, double shutdown_seconds, int rank,
                               std::FILE* out)
    : check_seconds_(check_seconds),
      shutdown_seconds_(shutdown_seconds),
      rank_(rank),
      out_(out),
      last_look_(Clock::now()) {}

bool StallInspector::LookDue(Clock::time_point now) {
  if (Seconds(now - last_look_) < 1.0) return false;
  last_look_ = now;
  return true;
}

bool StallInspector::Inspect(const std::vector<Waiting>& waiting, Clock::time_point now,
                             const MissingRanks& missing_ranks) {
  double oldest = 0;      // what counts toward the shutdown time: not joins
  double oldest_any = 0;  // what may be reported
  for (const Waiting& w : waiting) {
    const double waited = Seconds(now - w.since);
    oldest_any = std::max(oldest_any, waited);
    if (!w.join) oldest = std::max(oldest, waited);
  }
  const bool abort = shutdown_seconds_ > 0 && oldest >= shutdown_seconds_;
  if (oldest_any < check_seconds_ && !abort) return false;

  const std::map<std::string, std::vector<int>> missing = missing_ranks();
  for (const Waiting& w : waiting) {
    const double waited = Seconds(now - w.since);
    if (waited < check_seconds_) continue;
    auto m = missing.find(w.name);
    const std::string ranks = m == missing.end() ? std::string() : RankList(m->second);
    if (w.join) {
      if (Seconds(now - last_join_report_) < check_seconds_) continue;
      last_join_report_ = now;
      std::fprintf(out_,
                   "tfdist (rank %d): has waited %.0f s in join() for %s to join; "
                   "it stands in for their collectives meanwhile\n",
                   rank_, waited,
                   ranks.empty() ? "the other ranks"
                                 : ((m->second.size() == 1 ? "rank " : "ranks ") + ranks).c_str());
      continue;
    }
    std::fprintf(out_,
                 "tfdist stall (rank %d): '%s' has waited %.0f s for the other ranks; %s\n",
                 rank_, w.name.c_str(), waited,
                 ranks.empty() ? "the ranks that have not submitted it are being identified"
                               : ("ranks that have not submitted it: " + ranks).c_str());
  }
  if (abort) {
    std::fprintf(out_,
                 "tfdist (rank %d): a collective waited %.0f s, longer than "
                 "TFDIST_STALL_SHUTDOWN_TIME=%.0f s; aborting the job\n",
                 rank_, oldest, shutdown_seconds_);
  }
  std::fflush(out_);
  return abort;
}

}  // namespace tfdist
