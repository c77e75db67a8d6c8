// Waiting for MPI requests without stealing the CPU from TensorFlow:
// MPI_Wait busy-polls, so we poll with MPI_Testall under the politeness of
// polite_wait.h (spin, then yield, then sleep, by a learned budget).
#ifndef TFDIST_MPI_MPI_WAIT_H_
#define TFDIST_MPI_MPI_WAIT_H_

#include <mpi.h>

#include "cc/core/base/status.h"
#include "cc/mpi/mpi_error.h"
#include "cc/core/transport/wait_kind.h"

namespace tfdist {

// Completes `count` requests of `comm`; returns MPI_SUCCESS or the error
// code of the first request that failed (never MPI_ERR_IN_STATUS, which
// says only that some request did). On an error, requests still pending are
// left as they are: the caller stops using the communicator.
//
// `oversubscribed`: the ranks of the communicator the requests belong to
// outnumber this node's cores (decided per runtime, CoresOversubscribed).
// Waits then keep polling with sched_yield, which hands the core to the
// peer they wait for, instead of sleeping (polling_budget.h).
int WaitAllPolitelyCode(int count, MPI_Request* requests, WaitKind kind, bool oversubscribed);

// The same as a Status: Internal naming `during` (the collective), MPI's
// error string and, for a dead peer, the failed ranks of `comm` (mpi_error.h).
Status WaitAllPolitely(MPI_Comm comm, int count, MPI_Request* requests, const char* during,
                       WaitKind kind, bool oversubscribed);

// Whether `ranks_on_node` ranks of one communicator outnumber the cores of
// this node. Per communicator, not per process: a process set's two ranks
// of a four-rank job on two cores each have a core while the others wait
// outside the set, and must not yield it at every poll as the four would.
bool CoresOversubscribed(int ranks_on_node);

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_WAIT_H_
