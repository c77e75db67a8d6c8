// StallInspector: what it reports, when, and when it says to abort.
#include <cstdio>
#include <string>
#include <vector>

#include "cc/core/runtime/stall_inspector.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using Inspector = tfdist::StallInspector;
using Clock = Inspector::Clock;

using Missing = std::map<std::string, std::vector<int>>;

// Runs one inspection and returns what it printed.
std::string Report(Inspector& inspector, const std::vector<Inspector::Waiting>& waiting,
                   Clock::time_point now, std::FILE* out, bool* abort,
                   const Missing& missing = {{"x", {1, 3}}, {"tfdist.join", {0}}}) {
  std::rewind(out);
  *abort = inspector.Inspect(waiting, now, [&missing] { return missing; });
  const long length = std::ftell(out);
  std::string text(static_cast<size_t>(length), '\0');
  std::rewind(out);
  if (length > 0 && std::fread(&text[0], 1, text.size(), out) != text.size()) text.clear();
  std::rewind(out);
  return text;
}

}  // namespace

TFDIST_TEST(StallsAreReportedThenAbortButJoinsNeverAbort) {
  std::FILE* out = std::tmpfile();
  CHECK(out != nullptr);
  if (out == nullptr) return;
  const auto start = Clock::now();
  Inspector inspector(/*check_seconds=*/2, /*shutdown_seconds=*/5, /*rank=*/0, out);
  const std::vector<Inspector::Waiting> stalled = {{"x", start, false}};
  bool abort = true;

  CHECK(Report(inspector, stalled, start + std::chrono::seconds(1), out, &abort).empty());
  CHECK(!abort);
  const std::string report = Report(inspector, stalled, start + std::chrono::seconds(3), out, &abort);
  CHECK(report.find("'x' has waited 3 s for the other ranks; ranks that have not submitted "
                    "it: 1, 3") != std::string::npos);
  CHECK(!abort);
  const std::string last = Report(inspector, stalled, start + std::chrono::seconds(6), out, &abort);
  CHECK(last.find("aborting the job") != std::string::npos);
  CHECK(abort);

  const std::vector<Inspector::Waiting> joined = {{"tfdist.join", start, true}};
  const std::string join = Report(inspector, joined, start + std::chrono::seconds(60), out, &abort);
  CHECK(join.find("has waited 60 s in join() for rank 0 to join") != std::string::npos);
  CHECK(!abort);
  // Once per check interval.
  CHECK(Report(inspector, joined, start + std::chrono::seconds(61), out, &abort).empty());
  std::fclose(out);
}

// A long stall is reported at the check time, then at 2x, 4x, 8x it, not at
// every look; at most kListedStalls collectives are named per report.
TFDIST_TEST(StallReportsComeAtDoublingIntervalsAndAreCapped) {
  std::FILE* out = std::tmpfile();
  CHECK(out != nullptr);
  if (out == nullptr) return;
  const auto start = Clock::now();
  Inspector inspector(/*check_seconds=*/2, /*shutdown_seconds=*/0, /*rank=*/0, out);
  std::vector<Inspector::Waiting> stalled = {{"x", start, false}};
  Missing missing = {{"x", {1}}};
  for (int i = 0; i < 12; ++i) {
    stalled.push_back({"y" + std::to_string(i), start, false});
    missing["y" + std::to_string(i)] = {1};
  }
  std::vector<int> reported_at;
  bool abort = true;
  std::string first;
  std::string second_report;
  for (int second = 1; second <= 40; ++second) {
    const std::string text =
        Report(inspector, stalled, start + std::chrono::seconds(second), out, &abort, missing);
    CHECK(!abort);
    if (text.empty()) continue;
    reported_at.push_back(second);
    if (first.empty()) {
      first = text;
    } else if (second_report.empty()) {
      second_report = text;
    }
  }
  CHECK(reported_at == (std::vector<int>{2, 4, 8, 16, 32}));
  size_t lines = 0;
  for (char c : first) lines += c == '\n';
  // Eight named, one "and 5 more", one saying what comes next.
  CHECK_EQ_MSG(lines, Inspector::kListedStalls + 2, first);
  CHECK(first.find("and 5 more collectives waiting") != std::string::npos);
  CHECK(first.find("waits forever (TFDIST_STALL_SHUTDOWN_TIME=0)") != std::string::npos);
  // What comes next is said once per stall, not with every report.
  CHECK_EQ_MSG(second_report.find("reported again"), std::string::npos, second_report);
  CHECK(second_report.find("and 5 more collectives waiting") != std::string::npos);

  // Once the stall has cleared, the next one is reported from the check time again.
  const auto later = start + std::chrono::seconds(100);
  CHECK(Report(inspector, {}, later, out, &abort).empty());
  const std::vector<Inspector::Waiting> again = {{"z", later, false}};
  // A new stall's first report says it again.
  CHECK(Report(inspector, again, later + std::chrono::seconds(2), out, &abort)
            .find("reported again at doubling intervals") != std::string::npos);
  std::fclose(out);
}

// A tensor whose missing ranks are not known yet (announced by cache bit) is
// reported again at the next look, when they are, not a doubled interval later.
TFDIST_TEST(AnUnidentifiedStallIsReportedAgainAtTheNextLook) {
  std::FILE* out = std::tmpfile();
  CHECK(out != nullptr);
  if (out == nullptr) return;
  const auto start = Clock::now();
  Inspector inspector(2, 0, 0, out);
  const std::vector<Inspector::Waiting> stalled = {{"unknown", start, false}};
  bool abort = true;
  CHECK(Report(inspector, stalled, start + std::chrono::seconds(2), out, &abort)
            .find("being identified") != std::string::npos);
  CHECK(!Report(inspector, stalled, start + std::chrono::seconds(3), out, &abort).empty());
  // Then the doubling schedule: 4, 8, ...
  CHECK(!Report(inspector, stalled, start + std::chrono::seconds(4), out, &abort).empty());
  CHECK(Report(inspector, stalled, start + std::chrono::seconds(5), out, &abort).empty());
  std::fclose(out);
}

TFDIST_TEST(InspectorLooksAtMostOnceASecond) {
  const auto now = Clock::now();
  Inspector inspector(60, 0, 0, stderr);
  CHECK(!inspector.LookDue(now));
  CHECK(inspector.LookDue(now + std::chrono::milliseconds(1100)));
  CHECK(!inspector.LookDue(now + std::chrono::milliseconds(1500)));
}

}  // namespace tfdist_test
