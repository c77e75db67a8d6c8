// The production runtime: over MPI, on private duplicates of the user's
// communicator (one for the collectives' point-to-point messages, one for
// the control plane).
#ifndef TFDIST_CORE_RUNTIME_MPI_RUNTIME_H_
#define TFDIST_CORE_RUNTIME_MPI_RUNTIME_H_

#include <mpi.h>

#include <memory>

#include "cc/core/runtime/config.h"
#include "cc/core/runtime/runtime.h"

namespace tfdist {

// Collective over `comm`: every rank calls it. Checks that the ranks' settings
// agree, measures or reads the link cost, then starts the runtime.
Status CreateMpiRuntime(MPI_Comm comm, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_MPI_RUNTIME_H_
