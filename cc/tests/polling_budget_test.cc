// PollingBudget: poll while waits are mostly short, stop once they are long;
// and where a polite wait spins before it yields.
#include <chrono>

#include "cc/core/transport/polite_wait.h"
#include "cc/core/transport/polling_budget.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TFDIST_TEST(PollingBudgetPollsToTheLimitForShortWaits) {
  PollingBudget budget(microseconds(200));
  CHECK(budget.PollFor(false) == microseconds(200));
  for (int i = 0; i < 50; ++i) budget.Record(microseconds(40));
  CHECK(budget.PollFor(false) == microseconds(200));
}

TFDIST_TEST(PollingBudgetStopsPollingForLongWaits) {
  PollingBudget budget(microseconds(200));
  for (int i = 0; i < 5; ++i) budget.Record(milliseconds(3));
  CHECK(budget.PollFor(false) == PollingBudget::kMinimum);
  // Oversubscribed cores: always poll (yielding) to the limit.
  CHECK(budget.PollFor(true) == microseconds(200));
  // Training: one short wait after each long one keeps polling off ...
  for (int i = 0; i < 20; ++i) {
    budget.Record(milliseconds(2));
    budget.Record(microseconds(5));
  }
  CHECK(budget.PollFor(false) == PollingBudget::kMinimum);
  // ... a run of short waits turns it back on.
  for (int i = 0; i < 8; ++i) budget.Record(microseconds(5));
  CHECK(budget.PollFor(false) == microseconds(200));
}

TFDIST_TEST(PollingBudgetHasItsOwnLimitOnOversubscribedCores) {
  PollingBudget budget(milliseconds(2), microseconds(200));
  CHECK(budget.PollFor(false) == milliseconds(2));
  CHECK(budget.PollFor(true) == microseconds(200));
  // Waits are still judged against the first limit: 1 ms is short.
  for (int i = 0; i < 50; ++i) budget.Record(milliseconds(1));
  CHECK(budget.PollFor(false) == milliseconds(2));
  for (int i = 0; i < 5; ++i) budget.Record(milliseconds(3));
  CHECK(budget.PollFor(false) == PollingBudget::kMinimum);
  CHECK(budget.PollFor(true) == microseconds(200));
}

TFDIST_TEST(PollingBudgetShrugsOffARareLongWait) {
  PollingBudget budget(microseconds(200));
  for (int i = 0; i < 50; ++i) {
    budget.Record(microseconds(20));
    if (i % 10 == 0) budget.Record(std::chrono::seconds(1));
  }
  CHECK(budget.PollFor(false) == microseconds(200));
}

TFDIST_TEST(PoliteWaitSpinsOnlyWhereItsPollsCanHelp) {
  // Where ranks outnumber cores, a wait that its own polls do not move on
  // (shared-memory counters) yields from the first poll: the peer it waits
  // for may need this core. MPI's waits, which move messages by polling,
  // still spin first; with a core per rank, every wait does.
  const PollsProgress kinds[] = {PollsProgress::kYes, PollsProgress::kNo};
  for (PollsProgress progress : kinds) {
    CHECK(SpinBeforeYielding(false, progress) == microseconds(50));
  }
  CHECK(SpinBeforeYielding(true, PollsProgress::kYes) == microseconds(50));
  CHECK(SpinBeforeYielding(true, PollsProgress::kNo) == microseconds(0));
}

}  // namespace
}  // namespace tfdist
