// The production runtime: over MPI, on private duplicates of the user's
// communicator (one for the collectives' point-to-point messages, one for
// the control plane).
#ifndef TFDIST_MPI_MPI_RUNTIME_H_
#define TFDIST_MPI_MPI_RUNTIME_H_

#include <mpi.h>

#include <cstdint>
#include <memory>

#include "cc/core/runtime/config.h"
#include "cc/core/runtime/runtime.h"
#include "cc/core/runtime/topology.h"

namespace tfdist {

// Collective over `comm`: every rank calls it. Finds the real machines
// (their ranks' waits yield the core when a machine has more ranks than
// cores), checks that the ranks' settings agree, finds the hosts (virtual
// ones with TFDIST_VIRTUAL_HOSTS) into `topology`, puts the collectives and
// the control plane behind emulated inter-host links when
// TFDIST_EMULATED_BANDWIDTH is set, measures or reads the link costs, then
// starts the runtime.
Status CreateMpiRuntime(MPI_Comm comm, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out, Topology* topology);

// The same for `comm_handle`, an mpi4py communicator's MPI_Comm handle, so
// that callers (cc/tf) need not see MPI's types.
Status CreateMpiRuntime(uintptr_t comm_handle, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out, Topology* topology);

// A process set's runtime over `comm_handle` (the set's communicator): as
// above, but with the link costs `inherited` from the global set's runtime
// instead of measuring them again (they describe the same machines and
// links; the set's own hosts still decide the cost model's choice).
Status CreateMpiRuntime(uintptr_t comm_handle, const RuntimeConfig& config,
                        const NetworkCost& inherited, std::unique_ptr<Runtime>* out,
                        Topology* topology);

// Called as the process exits. After a peer failed (ULFM), Open MPI's
// MPI_Finalize can wait for good for the dead process, so the survivors
// would hang instead of exiting with their error. If a failure was seen,
// starts a thread that ends the process with exit code 1, saying why on
// stderr, unless it has ended within `seconds`; returns whether it did.
// `joined_after_failure`: this process was spawned by elastic recovery to
// replace a failed rank; its MPI_Finalize can wait for the dead process as
// well, though it never saw the failure itself.
bool GuardExitAfterPeerFailure(double seconds, bool joined_after_failure = false);

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_RUNTIME_H_
