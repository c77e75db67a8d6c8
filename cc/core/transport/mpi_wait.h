// Waiting for MPI requests without stealing the CPU from TensorFlow.
//
// MPI_Wait busy-polls: on a 2-core machine that costs TensorFlow's compute
// threads about a third of their throughput. We poll with MPI_Test for a
// short spin (a latency-bound message usually lands within microseconds),
// then yield, then sleep with a growing interval capped at 200 µs.
#ifndef TFDIST_CORE_TRANSPORT_MPI_WAIT_H_
#define TFDIST_CORE_TRANSPORT_MPI_WAIT_H_

#include <mpi.h>

#include "cc/core/status.h"

namespace tfdist {

// Completes `count` requests; returns Internal with MPI's error string if any
// of them failed. `what` names the operation in that message.
Status WaitAllPolitely(int count, MPI_Request* requests, const char* what);

// The error text MPI gives for `code`, prefixed with `what`.
Status MpiError(int code, const char* what);

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_MPI_WAIT_H_
