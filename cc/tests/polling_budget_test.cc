// PollingBudget: poll through short waits, stop polling once waits are long.
#include <chrono>

#include "cc/core/transport/polling_budget.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TFDIST_TEST(PollingBudgetFollowsShortWaits) {
  PollingBudget budget(microseconds(200));
  CHECK(budget.PollFor() >= PollingBudget::kMinimum);
  for (int i = 0; i < 50; ++i) budget.Record(microseconds(40));
  // Several times the typical wait, within the maximum.
  CHECK(budget.PollFor() >= microseconds(80));
  CHECK(budget.PollFor() <= microseconds(200));
}

TFDIST_TEST(PollingBudgetStopsPollingForLongWaits) {
  PollingBudget budget(microseconds(200));
  for (int i = 0; i < 50; ++i) budget.Record(milliseconds(3));
  CHECK(budget.PollFor() == PollingBudget::kMinimum);
  // A single short wait does not switch polling back on ...
  budget.Record(microseconds(5));
  CHECK(budget.PollFor() == PollingBudget::kMinimum);
  // ... a run of them does.
  for (int i = 0; i < 50; ++i) budget.Record(microseconds(5));
  CHECK(budget.PollFor() > PollingBudget::kMinimum);
  CHECK(budget.PollFor() <= microseconds(60));
}

TFDIST_TEST(PollingBudgetForgetsAnOutlier) {
  PollingBudget budget(microseconds(200));
  for (int i = 0; i < 50; ++i) budget.Record(microseconds(20));
  budget.Record(std::chrono::seconds(30));  // clipped
  for (int i = 0; i < 20; ++i) budget.Record(microseconds(20));
  CHECK(budget.PollFor() > PollingBudget::kMinimum);
}

}  // namespace
}  // namespace tfdist
