// The stall inspector (docs/runtime.md): reports this rank's collectives that
// have waited TFDIST_STALL_CHECK_TIME for the other ranks, naming the ranks
// that have not submitted them, and says when TFDIST_STALL_SHUTDOWN_TIME has
// passed: then the job aborts, or, with stall eviction on (elastic training,
// docs/elastic.md), the ranks that keep the collective waiting are evicted
// and the rest carry on (the runtime and negotiation.h decide whom). A stall
// is reported when its oldest
// collective has waited the check time, then at 2x, 4x, ... that time, so
// that a long stall prints a handful of reports rather than one a second;
// each report lists at most kListedStalls collectives, and only the first of a
// stall says when the next come and when the job aborts. A join waits, by
// design, as long as the other ranks still train: it is reported once per
// check interval and never counts toward the shutdown time.
#ifndef TFDIST_CORE_RUNTIME_STALL_INSPECTOR_H_
#define TFDIST_CORE_RUNTIME_STALL_INSPECTOR_H_

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tfdist {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  struct Waiting {
    std::string name;
    Clock::time_point since;  // when this rank announced it
    bool join = false;
  };
  // Name -> ranks that have not submitted it. Asked for only when something
  // is reported, since finding out may cost the runtime a full announcement.
  using MissingRanks = std::function<std::map<std::string, std::vector<int>>()>;

  // `check_seconds`, `shutdown_seconds` (0: never): the two settings.
  // `evicts`: past the shutdown time the stuck ranks are evicted rather
  // than the job aborted (only what the reports say differs). Reports go
  // to `out`.
  StallInspector(double check_seconds, double shutdown_seconds, int rank,
                 std::FILE* out = stderr, bool evicts = false);

  // Whether to look now: at most once a second, since this runs every round.
  bool LookDue(Clock::time_point now);
  // Collectives named in one report; the rest are counted.
  static constexpr size_t kListedStalls = 8;

  // Reports what has waited too long; returns true once a collective has
  // waited the shutdown time (the job must abort, or the stuck ranks go).
  bool Inspect(const std::vector<Waiting>& waiting, Clock::time_point now,
               const MissingRanks& missing_ranks);

 private:
  double check_seconds_;
  double shutdown_seconds_;
  int rank_;
  std::FILE* out_;
  bool evicts_;
  Clock::time_point last_look_;
  Clock::time_point last_join_report_;
  // The oldest wait, in seconds, at which the next stall report is due;
  // doubles after each report and starts again at the check time once
  // nothing has waited that long.
  double next_report_seconds_;
  // A report could not yet name the missing ranks and the next look repeats it.
  bool identify_retried_ = false;
  // This stall's first report said what comes next; later ones do not repeat it.
  bool schedule_said_ = false;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_STALL_INSPECTOR_H_
