// Transport over MPI point-to-point on a private duplicate of the user's
// communicator (mpi_comm.h), so that tfdist's messages can never match the
// user's own and a failed message is a Status naming the peer.
#ifndef TFDIST_MPI_MPI_TRANSPORT_H_
#define TFDIST_MPI_MPI_TRANSPORT_H_

#include <mpi.h>

#include <memory>

#include "cc/mpi/mpi_comm.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

class MpiTransport : public Transport {
 public:
  // Duplicates `comm`; the duplicate is freed with the transport.
  static Status Create(MPI_Comm comm, std::unique_ptr<MpiTransport>* out);
  MpiTransport(OwnedComm comm, int rank, int size, bool thread_multiple);
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool AllowsConcurrentCalls() const override { return thread_multiple_; }
  MPI_Comm comm() const { return comm_.get(); }
  // Whether this transport's ranks outnumber the node's cores (mpi_wait.h).
  void set_cores_oversubscribed(bool oversubscribed) { oversubscribed_ = oversubscribed; }

  std::unique_ptr<PendingOp> StartSend(int peer, const void* data,
                                       size_t bytes, int tag) override;
  std::unique_ptr<PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                       int tag) override;

 private:
  OwnedComm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool thread_multiple_ = false;  // MPI was initialised at MPI_THREAD_MULTIPLE
  bool oversubscribed_ = false;
};

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_TRANSPORT_H_
