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
// waits until the arrival time; the sender's Wait() waits until the message
// has left its NIC. Both sleep, and poll (yielding the core) only the last
// 200 µs, as a receiver polling its network would: sleeping to the end
// added the scheduler's wake-up delay to every message, most where all the
// ranks of an exchange slept at once; sleeping the rest keeps eight ranks on
// two cores measuring the modelled network rather than CPU contention. An
// exchange (SendRecv) dates its outgoing message when it is called, before
// its receive is posted: on shared memory, posting a receive for a large
// message that has already been announced copies it right there, and a
// message that could leave at the call must not wait for that copy.
// Times are steady_clock (CLOCK_MONOTONIC), which all processes of one
// machine share: the emulation is for ranks on one machine. Where the wrapped
// transport itself is slower than the model (a large message at a high
// modelled bandwidth), the message arrives when it really arrives.
//
// The modelled clock: beside the wall-clock arrival, the header carries the
// arrival in a clock that only the modelled links advance (computing, copying
// and waking up cost nothing in it). Each instance keeps its rank's modelled
// time, starting at 0: a message leaves at max(modelled now, modelled NIC
// free) + bytes / bandwidth; a finished send moves the sender's modelled time
// to that; a finished receive moves the receiver's to the arrival. It
// follows cause and effect through the inter-host messages, so it is a pure
// function of what the ranks send to whom: modelled_seconds() is what the
// wall clock would show on an infinitely fast machine, deterministic, and
// the wall clock minus it is what the emulation or the program adds (late
// wake-ups, copies, a rank that was busy). Messages within a host carry no
// clock (they pass untouched), so it misses causes that travel through them;
// and one instance keeps one clock per rank, so a rank that runs two message
// streams on two threads (hierarchical's side thread) dates each by the
// later of the two.
//
// Thread-safe like the wrapped transport; the NIC state is per instance, so
// use one instance per rank. Operations it starts must be finished before it
// is destroyed (they move its modelled clock).
#ifndef TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_
#define TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cc/core/transport/transport.h"

namespace tfdist {

struct EmulatedLink {
  double bytes_per_second = 0.0;  // > 0
  double latency_s = 0.0;         // >= 0
};

// What an inter-host message carries ahead of its payload, on the same tag:
// its arrival on the wall clock (steady_clock ticks) and in the modelled
// clock (seconds).
struct EmulatedHeader {
  int64_t arrival_ticks = 0;
  double modelled_arrival_s = 0.0;
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

  // This rank's modelled time in seconds (see the top): where the modelled
  // links alone have brought it since construction, through the operations
  // finished so far.
  double modelled_seconds() const;

  // Moves this rank's modelled time to `seconds` if that is later (what
  // finishing an operation does); also used by the operations themselves.
  void AdvanceModelledTo(double seconds);

 private:
  using Clock = std::chrono::steady_clock;

  // When a message leaves this rank's NIC, on the wall clock and modelled.
  struct Departure {
    Clock::time_point left_nic;
    double modelled_left_s = 0.0;
  };

  bool CrossesHosts(int peer) const;
  // When a message of `bytes` posted now leaves this rank's NIC; the NIC is
  // busy until then.
  Departure ReserveNic(size_t bytes);
  // An inter-host send that leaves the NIC at `departure`.
  std::unique_ptr<PendingOp> PostSend(int peer, const void* data, size_t bytes, int tag,
                                      const Departure& departure);

  Transport& inner_;
  const std::vector<int> host_of_rank_;
  const EmulatedLink link_;
  mutable std::mutex nic_mutex_;
  Clock::time_point nic_free_;      // guarded by nic_mutex_
  double modelled_nic_free_s_ = 0;  // guarded by nic_mutex_
  double modelled_now_s_ = 0;       // guarded by nic_mutex_
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_EMULATED_LINK_TRANSPORT_H_
