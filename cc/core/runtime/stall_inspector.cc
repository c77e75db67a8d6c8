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
                               std::FILE* out, bool evicts)
    : check_seconds_(check_seconds),
      shutdown_seconds_(shutdown_seconds),
      rank_(rank),
      out_(out),
      evicts_(evicts),
      last_look_(Clock::now()),
      next_report_seconds_(check_seconds) {}

bool StallInspector::LookDue(Clock::time_point now) {
  if (Seconds(now - last_look_) < 1.0) return false;
  last_look_ = now;
  return true;
}

bool StallInspector::Inspect(const std::vector<Waiting>& waiting, Clock::time_point now,
                             const MissingRanks& missing_ranks) {
  double oldest = 0;       // what counts toward the shutdown time: not joins
  double oldest_join = 0;
  for (const Waiting& w : waiting) {
    const double waited = Seconds(now - w.since);
    double& slot = w.join ? oldest_join : oldest;
    slot = std::max(slot, waited);
  }
  const bool abort = shutdown_seconds_ > 0 && oldest >= shutdown_seconds_;
  if (oldest < check_seconds_) {
    next_report_seconds_ = check_seconds_;
    identify_retried_ = false;
    schedule_said_ = false;
  }
  const bool stall_due = oldest >= next_report_seconds_ || abort;
  const bool join_due = oldest_join >= check_seconds_ &&
                        Seconds(now - last_join_report_) >= check_seconds_;
  if (!stall_due && !join_due) return false;

  const std::map<std::string, std::vector<int>> missing = missing_ranks();
  size_t listed = 0;
  size_t unlisted = 0;
  bool join_reported = false;
  bool unidentified = false;
  for (const Waiting& w : waiting) {
    const double waited = Seconds(now - w.since);
    if (waited < check_seconds_) continue;
    auto m = missing.find(w.name);
    const std::string ranks = m == missing.end() ? std::string() : RankList(m->second);
    if (w.join) {
      if (!join_due) continue;
      join_reported = true;
      std::fprintf(out_,
                   "tfdist (rank %d): has waited %.0f s in join() for %s to join; "
                   "it stands in for their collectives meanwhile\n",
                   rank_, waited,
                   ranks.empty() ? "the other ranks"
                                 : ((m->second.size() == 1 ? "rank " : "ranks ") + ranks).c_str());
      continue;
    }
    if (!stall_due) continue;
    if (listed == kListedStalls) {
      ++unlisted;
      continue;
    }
    ++listed;
    unidentified = unidentified || ranks.empty();
    std::fprintf(out_,
                 "tfdist stall (rank %d): '%s' has waited %.0f s for the other ranks; %s\n",
                 rank_, w.name.c_str(), waited,
                 ranks.empty() ? "the ranks that have not submitted it are being identified"
                               : ("ranks that have not submitted it: " + ranks).c_str());
  }
  if (join_reported) last_join_report_ = now;
  if (unlisted > 0) {
    std::fprintf(out_, "tfdist stall (rank %d): and %zu more collectives waiting\n", rank_,
                 unlisted);
  }
  if (abort && evicts_) {
    std::fprintf(out_,
                 "tfdist (rank %d): a collective waited %.0f s, longer than "
                 "TFDIST_STALL_SHUTDOWN_TIME=%.0f s; the ranks that have not submitted it are "
                 "evicted (they exit) and elastic training carries on without them\n",
                 rank_, oldest, shutdown_seconds_);
  } else if (abort) {
    std::fprintf(out_,
                 "tfdist (rank %d): a collective waited %.0f s, longer than "
                 "TFDIST_STALL_SHUTDOWN_TIME=%.0f s; aborting the job. A rank that skipped a collective, "
                 "named it differently, or is stuck outside tfdist stalls the others; "
                 "set TFDIST_STALL_SHUTDOWN_TIME=0 to wait forever\n",
                 rank_, oldest, shutdown_seconds_);
  } else if (stall_due) {
    if (unidentified && !identify_retried_) {
      // Finding the missing ranks of a cached tensor takes one more round:
      // report once more at the next look rather than a doubled interval later.
      identify_retried_ = true;
    } else {
      while (next_report_seconds_ <= oldest) next_report_seconds_ *= 2;
    }
    if (schedule_said_) {
      // Said with this stall's first report.
    } else if (shutdown_seconds_ > 0 && evicts_) {
      std::fprintf(out_,
                   "tfdist stall (rank %d): reported again at doubling intervals; the ranks "
                   "that keep a collective waiting %.0f s are evicted "
                   "(TFDIST_STALL_SHUTDOWN_TIME; 0 waits forever)\n",
                   rank_, shutdown_seconds_);
    } else if (shutdown_seconds_ > 0) {
      std::fprintf(out_,
                   "tfdist stall (rank %d): reported again at doubling intervals; the job "
                   "aborts when a collective has waited %.0f s (TFDIST_STALL_SHUTDOWN_TIME; "
                   "0 waits forever)\n",
                   rank_, shutdown_seconds_);
    } else {
      std::fprintf(out_,
                   "tfdist stall (rank %d): reported again at doubling intervals; the job "
                   "waits forever (TFDIST_STALL_SHUTDOWN_TIME=0)\n",
                   rank_);
    }
    schedule_said_ = true;
  }
  std::fflush(out_);
  return abort;
}

}  // namespace tfdist
