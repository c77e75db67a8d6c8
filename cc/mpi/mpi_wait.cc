#include "cc/mpi/mpi_wait.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/transport/polling_budget.h"

namespace tfdist {

namespace {

using Clock = std::chrono::steady_clock;

// The first part of the polling budget spins on MPI_Testall; the rest yields
// the core between tests.
constexpr auto kSpinFor = std::chrono::microseconds(50);
// Sleeps start short and double: a peer that is nearly there is noticed
// soon, one that is far away costs few wake-ups.
constexpr auto kFirstSleep = std::chrono::microseconds(20);
// The longest sleep while the wait is young: it is also how late a rank may
// notice the last peer arriving, which in training is on the critical path.
constexpr auto kMaxSleep = std::chrono::microseconds(250);
// Waits older than this are for a peer that is far behind (a slow rank, a
// barrier at the end of an epoch); they sleep up to kMaxLongSleep.
constexpr auto kLongWait = std::chrono::milliseconds(10);
constexpr auto kMaxLongSleep = std::chrono::milliseconds(1);

// With more ranks than cores, a rank that polls for a negotiation may hold
// the very core that the rank it waits for needs to get there: yielding does
// not reliably hand it over. So there it keeps a tenth of the limit below:
// with more ranks than cores, small eager allreduces were slower with the
// longer poll (the spread is wide: ranks share the cores).
constexpr auto kOversubscribedRendezvousPoll = std::chrono::microseconds(200);

PollingBudget& BudgetFor(WaitKind kind) {
  // Both kinds poll for up to 2 ms while their waits mostly end within it.
  // Data of a collective every rank has entered moves steadily (a large
  // segment through shared memory takes up to that). A negotiation round
  // waits for ranks that are still computing, which in synchronous training
  // is the other ranks' lag behind this one: a few hundred µs. A sleeping
  // rank notices the last one arrive up to a sleep late, and every rank
  // waits for the latest: a tenth of this limit cost a small MLP's step a
  // noticeable share of its time against the no-communication ceiling.
  // Yielding between tests leaves the core to any thread that wants it.
  // Per thread and kind, because they wait for different things: the
  // background thread's idle rounds wait long for the peers' idle rounds,
  // while a thread driving eager collectives meets peers doing the same.
  constexpr auto kLimit = std::chrono::milliseconds(2);
  thread_local PollingBudget transfer(kLimit);
  thread_local PollingBudget rendezvous(kLimit, kOversubscribedRendezvousPoll);
  thread_local PollingBudget stand_in(kLimit, kOversubscribedRendezvousPoll);
  switch (kind) {
    case WaitKind::kTransfer: return transfer;
    case WaitKind::kStandIn: return stand_in;
    case WaitKind::kRendezvous:
    case WaitKind::kIdle:  // never recorded; see WaitAllPolitely
      break;
  }
  return rendezvous;
}

}  // namespace

bool CoresOversubscribed(int ranks_on_node) {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 && ranks_on_node > 0 && static_cast<unsigned>(ranks_on_node) > cores;
}

int WaitAllPolitelyCode(int count, MPI_Request* requests, WaitKind kind, bool oversubscribed) {
  PollingBudget* budget = kind == WaitKind::kIdle ? nullptr : &BudgetFor(kind);
  const auto poll_for = budget != nullptr
                            ? budget->PollFor(oversubscribed)
                            : std::chrono::nanoseconds(PollingBudget::kMinimum);
  const auto start = Clock::now();
  std::chrono::microseconds sleep = kFirstSleep;
  // MPI_ERR_IN_STATUS says only that some request failed; its status says how.
  constexpr int kInlineStatuses = 4;
  MPI_Status inline_statuses[kInlineStatuses];
  std::vector<MPI_Status> more_statuses(count > kInlineStatuses ? count : 0);
  MPI_Status* statuses = count > kInlineStatuses ? more_statuses.data() : inline_statuses;
  while (true) {
    int done = 0;
    const int rc = MPI_Testall(count, requests, &done, statuses);
    if (rc == MPI_ERR_IN_STATUS) {
      for (int i = 0; i < count; ++i) {
        const int code = statuses[i].MPI_ERROR;
        if (code != MPI_SUCCESS && code != MPI_ERR_PENDING) return code;
      }
      return rc;
    }
    if (rc != MPI_SUCCESS) return rc;
    const auto waited = Clock::now() - start;
    if (done) {
      if (budget != nullptr) budget->Record(waited);
      return MPI_SUCCESS;
    }
    if (waited < kSpinFor && waited < poll_for) continue;
    if (waited < poll_for) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    const auto cap = waited < kLongWait ? kMaxSleep : std::chrono::microseconds(kMaxLongSleep);
    sleep = std::min(2 * sleep, cap);
  }
}

Status WaitAllPolitely(MPI_Comm comm, int count, MPI_Request* requests, const char* during,
                       WaitKind kind, bool oversubscribed) {
  const int rc = WaitAllPolitelyCode(count, requests, kind, oversubscribed);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Testall", during, comm);
  return Status::OK();
}

}  // namespace tfdist
