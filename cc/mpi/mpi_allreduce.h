// MPI_Allreduce itself, for the "mpi" algorithm: the reference every
// tfdist algorithm is measured against.
#ifndef TFDIST_MPI_MPI_ALLREDUCE_H_
#define TFDIST_MPI_MPI_ALLREDUCE_H_

#include <mpi.h>

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"

namespace tfdist {

// `input` reduced into `output` (in place where they are equal: MPI_IN_PLACE).
// float16/bfloat16 are not accepted (the runtime stages them in float32
// first); counts above INT_MAX go in several calls.
//
// The blocking MPI_Allreduce, not MPI_Iallreduce and a polite wait as the
// negotiation rounds use (mpi_wait.h). Open MPI runs the two with different
// algorithms (coll/tuned against libnbc), and the nonblocking one took
// 1.3-2.5x MPI_Allreduce's time at np 2 from 1 MiB to 64 MiB (68 ms against
// 33 ms at 64 MiB). Busy-polling costs little here: the call comes after a
// negotiation round, so every rank is already in it.
Status MpiNativeAllreduce(MPI_Comm comm, const void* input, void* output, size_t count,
                          DataType dtype, ReduceOp op);

// Whether MpiNativeAllreduce reduces `dtype`.
bool MpiCanReduce(DataType dtype);

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_ALLREDUCE_H_
