// The control plane over MPI's own nonblocking collectives on a private
// duplicate of the user's communicator: the production path. Each waits
// with WaitAllPolitely and the caller's WaitKind (mpi_wait.h), so a rank
// waiting for a negotiation round leaves the core to TensorFlow.
#ifndef TFDIST_MPI_MPI_CONTROL_PLANE_H_
#define TFDIST_MPI_MPI_CONTROL_PLANE_H_

#include <mpi.h>

#include <memory>

#include "cc/core/control/control_plane.h"
#include "cc/mpi/mpi_comm.h"

namespace tfdist {

class MpiControlPlane : public ControlPlane {
 public:
  // Duplicates `comm` (mpi_comm.h); the duplicate is freed with the plane.
  static Status Create(MPI_Comm comm, std::unique_ptr<MpiControlPlane>* out);
  MpiControlPlane(OwnedComm comm, int rank, int size);
  MpiControlPlane(const MpiControlPlane&) = delete;
  MpiControlPlane& operator=(const MpiControlPlane&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AndAllreduce(uint64_t* words, size_t count, WaitKind wait) override;
  Status Allgatherv(const std::vector<uint8_t>& mine, WaitKind wait,
                    std::vector<std::vector<uint8_t>>* per_rank) override;
  Status Barrier(WaitKind wait) override;
  // MPI_Abort; the reason has been reported by the caller (stall_inspector.h).
  void Abort(const std::string& reason) override;
  bool closed() const override;
  // Whether this plane's ranks outnumber the node's cores (mpi_wait.h).
  void set_cores_oversubscribed(bool oversubscribed) { oversubscribed_ = oversubscribed; }

 private:
  OwnedComm comm_;
  bool oversubscribed_ = false;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_CONTROL_PLANE_H_
