// Waiting for MPI requests without stealing the CPU from TensorFlow.
//
// MPI_Wait busy-polls: on a 2-core machine that costs TensorFlow's compute
// threads about a third of their throughput. We poll with MPI_Test for a
// short spin (a latency-bound message usually lands within microseconds),
// then poll with sched_yield between tests (for up to 10 ms while data moves,
// 200 µs while negotiating), then sleep with
// a growing interval capped at 1 ms. Yielding keeps MPI's progress engine
// turning while a large message streams through shared memory (both sides
// must keep testing for its fragments to move), yet gives the core to any
// TensorFlow thread that wants it; sleeping only starts once the peer is
// evidently busy elsewhere (a long wait for another rank).
#ifndef TFDIST_CORE_TRANSPORT_MPI_WAIT_H_
#define TFDIST_CORE_TRANSPORT_MPI_WAIT_H_

#include <mpi.h>

#include "cc/core/status.h"

namespace tfdist {

// How long a wait keeps yielding before it starts to sleep.
enum class WaitKind {
  // Data of a collective that every rank has entered: the peer is there, so
  // keep the progress engine turning (yield for up to 10 ms).
  kTransfer,
  // A negotiation round, which waits for ranks that may still be computing:
  // yield only briefly (200 µs), then sleep.
  kRendezvous,
};

// Completes `count` requests; returns Internal with MPI's error string if any
// of them failed. `what` names the operation in that message.
Status WaitAllPolitely(int count, MPI_Request* requests, const char* what,
                       WaitKind kind = WaitKind::kTransfer);

// The error text MPI gives for `code`, prefixed with `what`.
Status MpiError(int code, const char* what);

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_MPI_WAIT_H_
