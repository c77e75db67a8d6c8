// The one runtime handle of the process: set by tfdist_init, cleared by
// tfdist_shutdown, read by every kernel. Kernels hold a shared_ptr while
// they enqueue, so shutdown never frees a runtime under their feet.
#ifndef TFDIST_TF_RUNTIME_HANDLE_H_
#define TFDIST_TF_RUNTIME_HANDLE_H_

#include <memory>
#include <string>

#include "cc/core/compression/state_store.h"
#include "cc/core/runtime/runtime.h"
#include "cc/core/runtime/topology.h"

namespace tfdist {

struct RuntimeHandle {
  std::shared_ptr<Runtime> runtime;
  Topology topology;
  // Error-feedback residuals and PowerSGD factors of this rank; made with
  // the runtime and dropped with it.
  std::shared_ptr<StateStore> compression_state;
};

// Empty runtime when tfdist is not initialized.
RuntimeHandle CurrentRuntime();

// The error a collective (`what`: its op type) reports when tfdist is not
// initialized.
Status NotInitializedError(const std::string& what);
void SetCurrentRuntime(RuntimeHandle handle);

}  // namespace tfdist

#endif  // TFDIST_TF_RUNTIME_HANDLE_H_
