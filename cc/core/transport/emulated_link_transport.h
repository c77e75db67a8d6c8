// A Transport that makes the links between hosts as slow as a modelled
// network, so that one machine can stand in for several (virtual hosts) in
// tests and benchmarks. It wraps any Transport and knows each rank's host;
// messages within a host pass through untouched.
//
// Model: every rank has its own full-duplex NIC of `bytes_per_second`. An
// inter-host message starts when it is posted or when this rank's previous
// inter-host message has left its NIC, whichever is later; it occupies the
// NIC for bytes/bandwidth and arrives `latency_s` after that:
//   arrival = max(posted, nic_free) + bytes / bandwidth + latency.
//
// How: the payload is handed to the wrapped transport at once (an algorithm
// may wait on its receive before its send, so holding the send back until
// Wait() could deadlock), preceded by an 8-byte header on the same tag that
// carries the arrival time. The receiver's Wait() waits for both, then
// sleeps until the arrival time; the sender's Wait() sleeps until the
// message has left its NIC. Both sleep, never spin, so that eight ranks on
// two cores measure the modelled network rather than CPU contention. An
// exchange (SendRecv) dates its outgoing message when it is called, before
// its receive is posted: on shared memory, posting a receive for a large
// message that has already been announced copies it right there, and a
// message that could leave at the call must not wait for that copy.
// Times are steady_clock (CLOCK_MONOTONIC), which all processes of one
// machine share: the emulation is for ranks on one machine. Where the wrapped
// transport itself is slower than the model (a large message at a high
// modelled bandwidth), the message arrives when it really arrives.
//
// Thread-safe like the wrapped transport; the NIC state is per instance, so
// use one instance per rank.
#ifndef TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_
#define TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "cc/core/transport/transport.h"

namespace tfdist {

struct EmulatedLink {
  double bytes_per_second = 0.0;  // > 0
  double latency_s = 0.0;         // >= 0
};

// OK, or InvalidArgument naming TFDIST_EMULATED_BANDWIDTH or
// TFDIST_EMULATED_LATENCY.
Status CheckEmulatedLink(const EmulatedLink& link);

// The modelled one-way time of one message on an idle NIC.
double EmulatedMessageSeconds(const EmulatedLink& link, size_t bytes);

class EmulatedLinkTransport : public Transport {
 public:
  // `host_of_rank[r]` labels rank r's host (size() entries); `link` must pass
  // CheckEmulatedLink.
  EmulatedLinkTransport(Transport& inner, std::vector<int> host_of_rank, EmulatedLink link);

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  // The NIC state is guarded by a mutex, so this adds no restriction.
  bool AllowsConcurrentCalls() const override { return inner_.AllowsConcurrentCalls(); }
  std::unique_ptr<PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                       int tag) override;
  std::unique_ptr<PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                       int tag) override;
  Status SendRecv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                  void* recv_data, size_t recv_bytes, int tag) override;

  const EmulatedLink& link() const { return link_; }

 private:
  using Clock = std::chrono::steady_clock;

  bool CrossesHosts(int peer) const;
  // When a message of `bytes` posted now leaves this rank's NIC; the NIC is
  // busy until then.
  Clock::time_point ReserveNic(size_t bytes);
  // An inter-host send that leaves the NIC at `left_nic`.
  std::unique_ptr<PendingOp> PostSend(int peer, const void* data, size_t bytes, int tag,
                                      Clock::time_point left_nic);

  Transport& inner_;
  const std::vector<int> host_of_rank_;
  const EmulatedLink link_;
  std::mutex nic_mutex_;
  Clock::time_point nic_free_;  // guarded by nic_mutex_
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_
