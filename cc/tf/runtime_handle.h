// The runtimes of the process: one per process set, in a table keyed by the
// set's id. Id 0 (kGlobalProcessSet) is the global set, set by tfdist_init
// and cleared by tfdist_shutdown; the others are added and removed by the
// Python layer (tfdist/process_sets.py), which hands out ids that are never
// reused, so a stale id always fails with a clear error. Kernels hold a
// shared_ptr while they enqueue, so removing a set never frees a runtime
// under their feet.
#ifndef TFDIST_TF_RUNTIME_HANDLE_H_
#define TFDIST_TF_RUNTIME_HANDLE_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/core/compression/state_store.h"
#include "cc/core/runtime/runtime.h"
#include "cc/core/runtime/topology.h"

namespace tfdist {

constexpr int kGlobalProcessSet = 0;

struct RuntimeHandle {
  std::shared_ptr<Runtime> runtime;
  // Ranks, sizes and hosts within the set (for the global set, the job's).
  Topology topology;
  // Error-feedback residuals and PowerSGD factors of this rank; made with
  // the runtime and dropped with it.
  std::shared_ptr<StateStore> compression_state;
};

// The global set's runtime; empty when tfdist is not initialized.
RuntimeHandle CurrentRuntime();

// The error a collective (`what`: its op type) reports when tfdist is not
// initialized.
Status NotInitializedError(const std::string& what);

// Sets the global set's runtime (an empty handle: clears it).
void SetCurrentRuntime(RuntimeHandle handle);

// The runtime of process set `id` on this rank, for a collective `what`.
// FailedPrecondition, naming the set, when tfdist is not initialized, when
// `id` is not registered (removed, or from before a re-init), or when this
// rank is not one of the set's members.
Status ProcessSetRuntime(int id, const std::string& what, RuntimeHandle* out);

// The same, the runtime alone: for a call that needs nothing else (its
// size is Runtime::size()), without copying the topology's vectors and
// host names on every call (the eager fast path, cc/tf/eager_api.cc).
Status ProcessSetRuntimeOnly(int id, const std::string& what, std::shared_ptr<Runtime>* out);

// Registers process set `id` with its `ranks` (global ranks, sorted). On a
// member `handle` holds its runtime; on any other rank it is empty, and the
// entry only serves the "not in process set" error. InvalidArgument when
// `id` is already registered or is the global set's.
Status AddProcessSet(int id, std::vector<int> ranks, RuntimeHandle handle);

// Unregisters process set `id` and returns its handle (empty runtime on a
// non-member); FailedPrecondition when it is not registered.
Status TakeProcessSet(int id, RuntimeHandle* out);

// Unregisters every process set but the global one and returns their
// handles, in increasing id order (so that every rank stops them alike).
std::vector<RuntimeHandle> TakeAllProcessSets();

// The ids of the registered process sets, global one included.
std::vector<int> ProcessSetIds();

}  // namespace tfdist

#endif  // TFDIST_TF_RUNTIME_HANDLE_H_
