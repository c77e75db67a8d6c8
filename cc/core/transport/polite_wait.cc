#include "cc/core/transport/polite_wait.h"

namespace tfdist {

namespace {

// With more ranks than cores, a rank that polls for a negotiation may hold
// the very core that the rank it waits for needs to get there: yielding does
// not reliably hand it over. So there it keeps a tenth of the limit below:
// with more ranks than cores, small eager allreduces were slower with the
// longer poll (the spread is wide: ranks share the cores).
constexpr auto kOversubscribedRendezvousPoll = std::chrono::microseconds(200);

}  // namespace

PollingBudget* PollingBudgetFor(WaitKind kind) {
  // Both kinds poll for up to 2 ms while their waits mostly end within it.
  // Data of a collective every rank has entered moves steadily (a large
  // segment through shared memory takes up to that). A negotiation round
  // waits for ranks that are still computing, which in synchronous training
  // is the other ranks' lag behind this one: a few hundred µs. A sleeping
  // rank notices the last one arrive up to a sleep late, and every rank
  // waits for the latest: a tenth of this limit cost a small MLP's step a
  // noticeable share of its time against the no-communication ceiling.
  constexpr auto kLimit = std::chrono::milliseconds(2);
  thread_local PollingBudget transfer(kLimit);
  thread_local PollingBudget rendezvous(kLimit, kOversubscribedRendezvousPoll);
  thread_local PollingBudget stand_in(kLimit, kOversubscribedRendezvousPoll);
  switch (kind) {
    case WaitKind::kTransfer: return &transfer;
    case WaitKind::kStandIn: return &stand_in;
    case WaitKind::kRendezvous: return &rendezvous;
    case WaitKind::kIdle: return nullptr;
  }
  return &rendezvous;
}

}  // namespace tfdist
