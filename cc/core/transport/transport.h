// The only thing a collective algorithm may talk to: point-to-point messages
// between the ranks of one group. Implementations: MpiTransport (a private
// duplicate of an MPI communicator) and InProcessTransport (threads as ranks,
// for unit tests without mpirun).
//
// Semantics every implementation guarantees:
//  * Messages between one (source, destination, tag) triple arrive in the
//    order they were sent, and a receive names its source (no wildcards).
//  * A receive must name exactly the byte count that was sent.
//  * Zero-byte messages are legal and still synchronise.
//  * A started operation must be waited on before its buffer is reused or
//    freed; PendingOp's destructor waits if the owner forgot, so a buffer is
//    never written after it died.
#ifndef TFDIST_CORE_TRANSPORT_TRANSPORT_H_
#define TFDIST_CORE_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <memory>

#include "cc/core/base/status.h"

namespace tfdist {

class PendingOp {
 public:
  virtual ~PendingOp() = default;
  // Blocks until the operation finished; returns its outcome. Calling it a
  // second time returns the same outcome without blocking.
  virtual Status Wait() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Whether two threads of this rank may start and wait on operations at
  // the same time (with disjoint peers). An algorithm that overlaps two
  // message streams on two threads asks first, and otherwise runs them one
  // after the other. False unless an implementation knows better: MPI
  // allows it only at MPI_THREAD_MULTIPLE.
  virtual bool AllowsConcurrentCalls() const { return false; }

  virtual std::unique_ptr<PendingOp> StartSend(int peer, const void* data,
                                               size_t bytes, int tag) = 0;
  virtual std::unique_ptr<PendingOp> StartRecv(int peer, void* data,
                                               size_t bytes, int tag) = 0;

  // Blocking conveniences built on the two primitives above.
  Status Send(int peer, const void* data, size_t bytes, int tag);
  Status Recv(int peer, void* data, size_t bytes, int tag);
  // Sends and receives at the same time, so that two ranks exchanging with
  // each other never deadlock. The receive is posted first (on shared
  // memory a message that finds its receive posted is copied once, straight
  // into place). A wrapper forwards it to what it wraps, so that a transport
  // that must see the exchange as one call (the emulated links date the
  // outgoing message at the call) does.
  virtual Status SendRecv(int send_peer, const void* send_data, size_t send_bytes,
                          int recv_peer, void* recv_data, size_t recv_bytes, int tag);
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_TRANSPORT_H_
