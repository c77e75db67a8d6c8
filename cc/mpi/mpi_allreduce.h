// MPI_Allreduce itself, for the "mpi" algorithm: the reference every
// tfdist algorithm is measured against.
#ifndef TFDIST_MPI_MPI_ALLREDUCE_H_
#define TFDIST_MPI_MPI_ALLREDUCE_H_

#include <mpi.h>

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"

namespace tfdist {

// In place. float16/bfloat16 are not accepted (the runtime stages them in
// float32 first); counts above INT_MAX go in several calls. `oversubscribed`:
// the waits' (mpi_wait.h).
Status MpiNativeAllreduce(MPI_Comm comm, void* buffer, size_t count,
                          DataType dtype, ReduceOp op, bool oversubscribed);

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_ALLREDUCE_H_
