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

// Runs one inspection and returns what it printed.
std::string Report(Inspector& inspector, const std::vector<Inspector::Waiting>& waiting,
                   Clock::time_point now, std::FILE* out, bool* abort) {
  std::rewind(out);
  *abort = inspector.Inspect(waiting, now, [] {
    return std::map<std::string, std::vector<int>>{{"x", {1, 3}}, {"tfdist.join", {0}}};
  });
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

TFDIST_TEST(InspectorLooksAtMostOnceASecond) {
  const auto now = Clock::now();
  Inspector inspector(60, 0, 0, stderr);
  CHECK(!inspector.LookDue(now));
  CHECK(inspector.LookDue(now + std::chrono::milliseconds(1100)));
  CHECK(!inspector.LookDue(now + std::chrono::milliseconds(1500)));
}

}  // namespace tfdist_test
