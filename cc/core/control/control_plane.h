// The collectives the runtime's control plane needs, behind one small
// interface, so that negotiation, the executor's barrier, the settings check
// and the stall shutdown run over MPI in production and over any Transport
// (threads as ranks in the unit tests; an emulated link) without a line of
// MPI in the runtime.
//
// Every method is collective: every rank of the group calls it, in the same
// order. Calls come from one thread at a time (the runtime's round lock), so
// implementations need no locking of their own.
#ifndef TFDIST_CORE_CONTROL_CONTROL_PLANE_H_
#define TFDIST_CORE_CONTROL_CONTROL_PLANE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/transport/wait_kind.h"

namespace tfdist {

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Bitwise AND of every rank's `count` words, in place. Every rank passes
  // the same count.
  virtual Status AndAllreduce(uint64_t* words, size_t count, WaitKind wait) = 0;
  // Every rank's `mine` (lengths may differ), indexed by rank.
  virtual Status Allgatherv(const std::vector<uint8_t>& mine, WaitKind wait,
                            std::vector<std::vector<uint8_t>>* per_rank) = 0;
  virtual Status Barrier(WaitKind wait) = 0;
  // Ends the job on every rank, naming `reason` (MPI_Abort). An
  // implementation may return (the unit tests' does, after failing every
  // rank's waits); the runtime then stops as if shut down.
  virtual void Abort(const std::string& reason) = 0;
  // True once the communication underneath has been torn down (MPI finalized
  // at process exit): nothing can be waited for any more.
  virtual bool closed() const { return false; }
};

}  // namespace tfdist

#endif  // TFDIST_CORE_CONTROL_CONTROL_PLANE_H_
