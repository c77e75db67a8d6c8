// Threads play ranks: an InProcessFabric owns one mailbox per destination
// rank, and fabric.transport(r) is the Transport that rank r's thread uses.
// It lets every collective be tested with P = 1..16 inside one process,
// without mpirun, and is what the C++ unit tests run on.
//
// Matching follows MPI's non-overtaking rule: messages are identified by
// (source, destination, tag), and the k-th receive *posted* (StartRecv) for a
// triple takes the k-th message *sent* on it, whatever order the operations
// are waited in.
//
// Two send modes:
//  * kBuffered (the default): StartSend copies the payload into the mailbox
//    and completes at once, so a send never blocks.
//  * kRendezvous: StartSend records only where the payload is; the receiver
//    copies straight out of the sender's buffer and the send completes when
//    it has. MPI treats large messages this way, so running a test in this
//    mode catches algorithms that deadlock without buffering, or that write a
//    send buffer before waiting on its send.
//
// A receive whose sizes disagree with the message fails with Internal on the
// receiver (and, in rendezvous mode, on the sender too) instead of hanging.
// A wait longer than the fabric's timeout fails with Internal, and Abort()
// fails every current and future wait with Aborted: RunOnThreads aborts the
// fabric as soon as one rank returns an error, so a failing test ends instead
// of leaving its peers blocked.
#ifndef TFDIST_TESTING_IN_PROCESS_TRANSPORT_H_
#define TFDIST_TESTING_IN_PROCESS_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

enum class InProcessSendMode { kBuffered, kRendezvous };

struct InProcessFabricOptions {
  InProcessSendMode send_mode = InProcessSendMode::kBuffered;
  // A receive, or a rendezvous send, that waits longer than this fails with
  // Internal (almost certainly a deadlock). Zero waits forever.
  std::chrono::milliseconds wait_timeout{60000};
};

class InProcessFabric {
 public:
  explicit InProcessFabric(int size);
  InProcessFabric(int size, InProcessFabricOptions options);
  ~InProcessFabric();
  InProcessFabric(const InProcessFabric&) = delete;
  InProcessFabric& operator=(const InProcessFabric&) = delete;

  int size() const { return size_; }
  // The Transport of rank `rank`, 0 <= rank < size(); owned by the fabric.
  // Operations it starts must be finished before the fabric is destroyed.
  Transport& transport(int rank);

  // Fails every blocked and future wait with Aborted(reason). Messages that
  // already arrived can still be received.
  void Abort(const std::string& reason);

  // Messages sent but not (yet) received, over all ranks. Zero after a
  // collective completes on every rank: anything else is a stray send.
  size_t UndeliveredMessageCount() const;

 private:
  struct Envelope;
  struct Mailbox;
  class RankTransport;
  class ReceiveOp;
  class RendezvousSendOp;

  std::unique_ptr<PendingOp> PostSend(int source, int destination,
                                      const void* data, size_t bytes, int tag);
  std::unique_ptr<PendingOp> PostReceive(int destination, int source,
                                         void* data, size_t bytes, int tag);
  Status CompleteReceive(int destination, int source, int tag,
                         unsigned long long ticket, void* data, size_t bytes);
  Status CompleteRendezvousSend(int destination, int tag,
                                const std::shared_ptr<Envelope>& envelope);
  Status AbortedStatus() const;

  const int size_;
  const InProcessFabricOptions options_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;  // indexed by destination
  std::vector<std::unique_ptr<RankTransport>> transports_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;  // guarded by abort_mutex_
};

// Runs body(transport) on one thread per rank of `fabric` and returns each
// rank's Status, indexed by rank. The first rank to fail aborts the fabric so
// that the others return (with Aborted) instead of waiting forever.
std::vector<Status> RunOnThreads(InProcessFabric& fabric,
                                 const std::function<Status(Transport&)>& body);

// Same, on a fresh fabric of `size` ranks with default options.
std::vector<Status> RunOnThreads(int size,
                                 const std::function<Status(Transport&)>& body);

}  // namespace tfdist

#endif  // TFDIST_TESTING_IN_PROCESS_TRANSPORT_H_
