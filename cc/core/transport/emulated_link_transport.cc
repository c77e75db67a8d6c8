#include "cc/core/transport/emulated_link_transport.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <utility>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace tfdist {
namespace {

using Clock = std::chrono::steady_clock;

// The last stretch of a wait is polled, as MPI polls for a message in
// flight, so that the wait ends when the modelled time comes. A thread asleep
// until then wakes when the scheduler gets to it: with four ranks on two
// cores, tens of µs late, and late most where every rank of an exchange
// sleeps at once, as in the butterfly's. Sleeping to the end made the
// butterfly across 2x2 emulated hosts at 50 µs slower per call than the
// tree, which the model (one inter-host latency against two) and a polling
// network rank the other way (docs/algorithms.md). Only the last
// kPollWindow: longer waits (a large message's time on the NIC, a 1 ms
// latency) sleep the rest, leaving the cores to the ranks that have work.
constexpr auto kPollWindow = std::chrono::microseconds(200);

// Linux lets a sleeping thread wake up to 50 us late by default (timer
// slack); ask for the tightest wake-up once per thread that sleeps here.
void WaitUntil(Clock::time_point when) {
#ifdef __linux__
  thread_local const bool tight_timer = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  (void)tight_timer;
#endif
  if (Clock::now() < when - kPollWindow) std::this_thread::sleep_until(when - kPollWindow);
  // Yielding: a rank with work on this core runs first.
  while (Clock::now() < when) std::this_thread::yield();
}

Clock::duration Seconds(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits for a message's header and its payload (both, even if one failed:
// neither buffer may be left to an unfinished operation); the first error wins.
Status WaitBoth(PendingOp& header, PendingOp& payload) {
  const Status header_status = header.Wait();
  const Status payload_status = payload.Wait();
  return header_status.ok() ? payload_status : header_status;
}

class EmulatedSendOp : public PendingOp {
 public:
  EmulatedSendOp(EmulatedLinkTransport& owner, Clock::time_point left_nic,
                 double modelled_left_s, EmulatedHeader header)
      : owner_(owner), left_nic_(left_nic), modelled_left_s_(modelled_left_s), header_(header) {}
  // Posted after construction: the header must already sit at its final address.
  void Post(Transport& inner, int peer, const void* data, size_t bytes, int tag) {
    header_op_ = inner.StartSend(peer, &header_, sizeof header_, tag);
    payload_op_ = inner.StartSend(peer, data, bytes, tag);
  }
  Status Wait() override {
    if (!done_) {
      status_ = WaitBoth(*header_op_, *payload_op_);
      if (status_.ok()) {
        WaitUntil(left_nic_);
        owner_.AdvanceModelledTo(modelled_left_s_);
      }
      done_ = true;
    }
    return status_;
  }
  ~EmulatedSendOp() override { Wait(); }

 private:
  EmulatedLinkTransport& owner_;
  const Clock::time_point left_nic_;
  const double modelled_left_s_;
  EmulatedHeader header_;
  std::unique_ptr<PendingOp> header_op_;
  std::unique_ptr<PendingOp> payload_op_;
  bool done_ = false;
  Status status_;
};

class EmulatedRecvOp : public PendingOp {
 public:
  explicit EmulatedRecvOp(EmulatedLinkTransport& owner) : owner_(owner) {}
  void Post(Transport& inner, int peer, void* data, size_t bytes, int tag) {
    header_op_ = inner.StartRecv(peer, &header_, sizeof header_, tag);
    payload_op_ = inner.StartRecv(peer, data, bytes, tag);
  }
  Status Wait() override {
    if (!done_) {
      status_ = WaitBoth(*header_op_, *payload_op_);
      if (status_.ok()) {
        WaitUntil(Clock::time_point(Clock::duration(header_.arrival_ticks)));
        owner_.AdvanceModelledTo(header_.modelled_arrival_s);
      }
      done_ = true;
    }
    return status_;
  }
  ~EmulatedRecvOp() override { Wait(); }

 private:
  EmulatedLinkTransport& owner_;
  EmulatedHeader header_;
  std::unique_ptr<PendingOp> header_op_;
  std::unique_ptr<PendingOp> payload_op_;
  bool done_ = false;
  Status status_;
};

}  // namespace

Status CheckEmulatedLink(const EmulatedLink& link) {
  if (!(link.bytes_per_second > 0) || !std::isfinite(link.bytes_per_second)) {
    return Status::InvalidArgument(
        "TFDIST_EMULATED_BANDWIDTH must be a positive number of bytes per second, got " +
        std::to_string(link.bytes_per_second));
  }
  if (!(link.latency_s >= 0) || !std::isfinite(link.latency_s)) {
    return Status::InvalidArgument(
        "TFDIST_EMULATED_LATENCY must be a non-negative number of seconds, got " +
        std::to_string(link.latency_s));
  }
  return Status::OK();
}

double EmulatedMessageSeconds(const EmulatedLink& link, size_t bytes) {
  return link.latency_s + static_cast<double>(bytes) / link.bytes_per_second;
}

EmulatedLinkTransport::EmulatedLinkTransport(Transport& inner, std::vector<int> host_of_rank,
                                             EmulatedLink link)
    : inner_(inner), host_of_rank_(std::move(host_of_rank)), link_(link) {}

bool EmulatedLinkTransport::CrossesHosts(int peer) const {
  const int me = inner_.rank();
  return peer != me && peer >= 0 && peer < static_cast<int>(host_of_rank_.size()) &&
         host_of_rank_[peer] != host_of_rank_[me];
}

EmulatedLinkTransport::Departure EmulatedLinkTransport::ReserveNic(size_t bytes) {
  const double wire_s = static_cast<double>(bytes) / link_.bytes_per_second;
  std::lock_guard<std::mutex> lock(nic_mutex_);
  const Clock::time_point start = std::max(Clock::now(), nic_free_);
  nic_free_ = start + Seconds(wire_s);
  modelled_nic_free_s_ = std::max(modelled_now_s_, modelled_nic_free_s_) + wire_s;
  return Departure{nic_free_, modelled_nic_free_s_};
}

double EmulatedLinkTransport::modelled_seconds() const {
  std::lock_guard<std::mutex> lock(nic_mutex_);
  return modelled_now_s_;
}

void EmulatedLinkTransport::AdvanceModelledTo(double seconds) {
  std::lock_guard<std::mutex> lock(nic_mutex_);
  modelled_now_s_ = std::max(modelled_now_s_, seconds);
}

std::unique_ptr<PendingOp> EmulatedLinkTransport::PostSend(int peer, const void* data,
                                                           size_t bytes, int tag,
                                                           const Departure& departure) {
  EmulatedHeader header;
  header.arrival_ticks =
      (departure.left_nic + Seconds(link_.latency_s)).time_since_epoch().count();
  header.modelled_arrival_s = departure.modelled_left_s + link_.latency_s;
  auto op = std::make_unique<EmulatedSendOp>(*this, departure.left_nic, departure.modelled_left_s,
                                             header);
  op->Post(inner_, peer, data, bytes, tag);
  return op;
}

std::unique_ptr<PendingOp> EmulatedLinkTransport::StartSend(int peer, const void* data,
                                                            size_t bytes, int tag) {
  if (!CrossesHosts(peer)) return inner_.StartSend(peer, data, bytes, tag);
  return PostSend(peer, data, bytes, tag, ReserveNic(bytes));
}

std::unique_ptr<PendingOp> EmulatedLinkTransport::StartRecv(int peer, void* data,
                                                            size_t bytes, int tag) {
  if (!CrossesHosts(peer)) return inner_.StartRecv(peer, data, bytes, tag);
  auto op = std::make_unique<EmulatedRecvOp>(*this);
  op->Post(inner_, peer, data, bytes, tag);
  return op;
}

Status EmulatedLinkTransport::SendRecv(int send_peer, const void* send_data, size_t send_bytes,
                                       int recv_peer, void* recv_data, size_t recv_bytes,
                                       int tag) {
  if (!CrossesHosts(send_peer)) {
    return Transport::SendRecv(send_peer, send_data, send_bytes, recv_peer, recv_data,
                               recv_bytes, tag);
  }
  const Departure departure = ReserveNic(send_bytes);  // dated at the call
  auto recv = StartRecv(recv_peer, recv_data, recv_bytes, tag);
  auto send = PostSend(send_peer, send_data, send_bytes, tag, departure);
  const Status recv_status = recv->Wait();
  const Status send_status = send->Wait();
  return recv_status.ok() ? send_status : recv_status;
}

}  // namespace tfdist
