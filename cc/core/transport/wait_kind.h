// How a wait for other ranks should spend the CPU while it waits. The
// control plane (control_plane.h) passes it to whatever waits: over MPI it
// picks the polling budget (mpi_wait.h); a Transport's own waits ignore it.
#ifndef TFDIST_CORE_TRANSPORT_WAIT_KIND_H_
#define TFDIST_CORE_TRANSPORT_WAIT_KIND_H_

namespace tfdist {

// Which polling budget a wait learns from and spends.
enum class WaitKind {
  // Data of a collective that every rank has entered: the peer is there, so
  // keep the progress engine turning (polls for up to 2 ms).
  kTransfer,
  // A negotiation round, which waits for ranks that may still be computing
  // (polls for up to 2 ms too, but hardly at all once waits are longer).
  kRendezvous,
  // A round this rank joins with nothing of its own to negotiate: it waits
  // for the others' idle rounds, which come every 100 ms. Polls only
  // briefly, and is not recorded: such waits say nothing about how long a
  // wait for work takes, and counting them turned polling off for the
  // first steps of every training run (and for good, when waits in
  // training were long enough to keep the score from recovering).
  kIdle,
  // A round of a rank that has joined (tfdist.join): it waits for the next
  // collective of the ranks still training. Its own budget: it should poll
  // while those come back to back (eager loops) and sleep while they come
  // after computation (training), without teaching either to the budgets
  // this rank uses once it trains again.
  kStandIn,
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_WAIT_KIND_H_
