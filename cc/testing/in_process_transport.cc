#include "cc/testing/in_process_transport.h"

#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

namespace tfdist {

// One sent message. Shared between the mailbox (until received) and, in
// rendezvous mode, the sender's PendingOp (until delivered).
struct InProcessFabric::Envelope {
  size_t bytes = 0;
  std::vector<unsigned char> payload;  // kBuffered: the copied message
  const void* sender_data = nullptr;   // kRendezvous: the sender's buffer
  bool delivered = false;              // kRendezvous: the receiver is done with it
  Status delivery_status;              // what the rendezvous send returns
};

// Messages addressed to one rank, per (source, tag). A channel numbers its
// sends and its posted receives separately; receive ticket k takes send k.
struct InProcessFabric::Mailbox {
  struct Channel {
    unsigned long long sends_posted = 0;
    unsigned long long receives_posted = 0;
    std::map<unsigned long long, std::shared_ptr<Envelope>> arrived;
  };

  std::mutex mutex;
  // Signalled when a message arrives here, when a message sent to here is
  // delivered (rendezvous senders wait on it), and on Abort.
  std::condition_variable changed;
  std::map<std::pair<int, int>, Channel> channels;  // key: (source, tag)
};

namespace {

// An operation that finished when it was started.
class CompletedOp : public PendingOp {
 public:
  explicit CompletedOp(Status status) : status_(std::move(status)) {}
  Status Wait() override { return status_; }

 private:
  Status status_;
};

std::string Describe(int source, int destination, int tag) {
  return "from rank " + std::to_string(source) + " to rank " +
         std::to_string(destination) + " (tag " + std::to_string(tag) + ")";
}

}  // namespace

class InProcessFabric::ReceiveOp : public PendingOp {
 public:
  ReceiveOp(InProcessFabric* fabric, int destination, int source, int tag,
            unsigned long long ticket, void* data, size_t bytes)
      : fabric_(fabric), destination_(destination), source_(source), tag_(tag),
        ticket_(ticket), data_(data), bytes_(bytes) {}
  // The contract: a forgotten operation is finished before its buffer dies.
  ~ReceiveOp() override { Wait(); }

  Status Wait() override {
    if (!finished_) {
      status_ = fabric_->CompleteReceive(destination_, source_, tag_, ticket_,
                                         data_, bytes_);
      finished_ = true;
    }
    return status_;
  }

 private:
  InProcessFabric* const fabric_;
  const int destination_;
  const int source_;
  const int tag_;
  const unsigned long long ticket_;
  void* const data_;
  const size_t bytes_;
  bool finished_ = false;
  Status status_;
};

class InProcessFabric::RendezvousSendOp : public PendingOp {
 public:
  RendezvousSendOp(InProcessFabric* fabric, int destination, int tag,
                   std::shared_ptr<Envelope> envelope)
      : fabric_(fabric), destination_(destination), tag_(tag),
        envelope_(std::move(envelope)) {}
  ~RendezvousSendOp() override { Wait(); }

  Status Wait() override {
    if (!finished_) {
      status_ = fabric_->CompleteRendezvousSend(destination_, tag_, envelope_);
      finished_ = true;
    }
    return status_;
  }

 private:
  InProcessFabric* const fabric_;
  const int destination_;
  const int tag_;
  const std::shared_ptr<Envelope> envelope_;
  bool finished_ = false;
  Status status_;
};

class InProcessFabric::RankTransport : public Transport {
 public:
  RankTransport(InProcessFabric* fabric, int rank) : fabric_(fabric), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  // Every mailbox is guarded by its own mutex.
  bool AllowsConcurrentCalls() const override { return true; }

  std::unique_ptr<PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                       int tag) override {
    return fabric_->PostSend(rank_, peer, data, bytes, tag);
  }
  std::unique_ptr<PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                       int tag) override {
    return fabric_->PostReceive(rank_, peer, data, bytes, tag);
  }

 private:
  InProcessFabric* const fabric_;
  const int rank_;
};

InProcessFabric::InProcessFabric(int size)
    : InProcessFabric(size, InProcessFabricOptions()) {}

InProcessFabric::InProcessFabric(int size, InProcessFabricOptions options)
    : size_(size < 0 ? 0 : size), options_(options) {
  for (int rank = 0; rank < size_; ++rank) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    transports_.push_back(std::make_unique<RankTransport>(this, rank));
  }
}

InProcessFabric::~InProcessFabric() = default;

Transport& InProcessFabric::transport(int rank) { return *transports_.at(rank); }

void InProcessFabric::Abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_) return;  // keep the first reason: it names the root cause
    abort_reason_ = reason;
    aborted_ = true;
  }
  // Taking each mailbox's lock before notifying means a waiter is either
  // already asleep (and woken) or has not yet checked aborted_ (and will see it).
  for (auto& mailbox : mailboxes_) {
    std::lock_guard<std::mutex> lock(mailbox->mutex);
    mailbox->changed.notify_all();
  }
}

Status InProcessFabric::AbortedStatus() const {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return Status::Aborted("in-process fabric aborted: " + abort_reason_);
}

size_t InProcessFabric::UndeliveredMessageCount() const {
  size_t undelivered = 0;
  for (const auto& mailbox : mailboxes_) {
    std::lock_guard<std::mutex> lock(mailbox->mutex);
    for (const auto& channel : mailbox->channels) {
      undelivered += channel.second.arrived.size();
    }
  }
  return undelivered;
}

std::unique_ptr<PendingOp> InProcessFabric::PostSend(int source, int destination,
                                                     const void* data,
                                                     size_t bytes, int tag) {
  if (destination < 0 || destination >= size_) {
    return std::make_unique<CompletedOp>(Status::InvalidArgument(
        "send to rank " + std::to_string(destination) + " outside a group of " +
        std::to_string(size_)));
  }
  auto envelope = std::make_shared<Envelope>();
  envelope->bytes = bytes;
  const bool buffered = options_.send_mode == InProcessSendMode::kBuffered;
  if (buffered) {
    // Copy outside the lock: large payloads must not stall the receiver.
    const auto* bytes_begin = static_cast<const unsigned char*>(data);
    if (bytes > 0) envelope->payload.assign(bytes_begin, bytes_begin + bytes);
  } else {
    envelope->sender_data = data;
  }
  Mailbox& mailbox = *mailboxes_[destination];
  {
    std::lock_guard<std::mutex> lock(mailbox.mutex);
    Mailbox::Channel& channel = mailbox.channels[{source, tag}];
    channel.arrived.emplace(channel.sends_posted++, envelope);
    mailbox.changed.notify_all();
  }
  if (buffered) return std::make_unique<CompletedOp>(Status::OK());
  return std::make_unique<RendezvousSendOp>(this, destination, tag,
                                            std::move(envelope));
}

std::unique_ptr<PendingOp> InProcessFabric::PostReceive(int destination,
                                                        int source, void* data,
                                                        size_t bytes, int tag) {
  if (source < 0 || source >= size_) {
    return std::make_unique<CompletedOp>(Status::InvalidArgument(
        "receive from rank " + std::to_string(source) + " outside a group of " +
        std::to_string(size_)));
  }
  Mailbox& mailbox = *mailboxes_[destination];
  unsigned long long ticket;
  {
    std::lock_guard<std::mutex> lock(mailbox.mutex);
    ticket = mailbox.channels[{source, tag}].receives_posted++;
  }
  return std::make_unique<ReceiveOp>(this, destination, source, tag, ticket,
                                     data, bytes);
}

Status InProcessFabric::CompleteReceive(int destination, int source, int tag,
                                        unsigned long long ticket, void* data,
                                        size_t bytes) {
  Mailbox& mailbox = *mailboxes_[destination];
  std::unique_lock<std::mutex> lock(mailbox.mutex);
  // std::map never moves its elements, so the reference stays valid.
  Mailbox::Channel& channel = mailbox.channels[{source, tag}];
  auto arrived_or_aborted = [&] {
    return channel.arrived.count(ticket) > 0 || aborted_.load();
  };
  if (options_.wait_timeout.count() > 0) {
    if (!mailbox.changed.wait_for(lock, options_.wait_timeout,
                                  arrived_or_aborted)) {
      return Status::Internal(
          "in-process receive of " + std::to_string(bytes) + " bytes " +
          Describe(source, destination, tag) + " timed out after " +
          std::to_string(options_.wait_timeout.count()) +
          " ms: a deadlock or a missing send");
    }
  } else {
    mailbox.changed.wait(lock, arrived_or_aborted);
  }
  auto found = channel.arrived.find(ticket);
  if (found == channel.arrived.end()) {
    lock.unlock();
    return AbortedStatus();
  }
  std::shared_ptr<Envelope> envelope = std::move(found->second);
  channel.arrived.erase(found);

  if (envelope->bytes != bytes) {
    const std::string what = "message size mismatch " +
                             Describe(source, destination, tag) + ": sent " +
                             std::to_string(envelope->bytes) +
                             " bytes, receive posted for " +
                             std::to_string(bytes);
    // A rendezvous sender learns about the mismatch too (a buffered one has
    // already completed).
    envelope->delivery_status = Status::Internal(what);
    envelope->delivered = true;
    mailbox.changed.notify_all();
    return Status::Internal(what);
  }

  lock.unlock();
  if (bytes > 0) {
    const void* source_bytes = envelope->sender_data != nullptr
                                   ? envelope->sender_data
                                   : envelope->payload.data();
    std::memcpy(data, source_bytes, bytes);
  }
  if (options_.send_mode == InProcessSendMode::kRendezvous) {
    lock.lock();
    envelope->delivered = true;
    mailbox.changed.notify_all();
  }
  return Status::OK();
}

Status InProcessFabric::CompleteRendezvousSend(
    int destination, int tag, const std::shared_ptr<Envelope>& envelope) {
  Mailbox& mailbox = *mailboxes_[destination];
  std::unique_lock<std::mutex> lock(mailbox.mutex);
  auto delivered_or_aborted = [&] {
    return envelope->delivered || aborted_.load();
  };
  if (options_.wait_timeout.count() > 0) {
    if (!mailbox.changed.wait_for(lock, options_.wait_timeout,
                                  delivered_or_aborted)) {
      return Status::Internal(
          "in-process rendezvous send of " + std::to_string(envelope->bytes) +
          " bytes to rank " + std::to_string(destination) + " (tag " +
          std::to_string(tag) + ") was not received within " +
          std::to_string(options_.wait_timeout.count()) +
          " ms: a deadlock or a missing receive");
    }
  } else {
    mailbox.changed.wait(lock, delivered_or_aborted);
  }
  if (!envelope->delivered) {
    lock.unlock();
    return AbortedStatus();
  }
  return envelope->delivery_status;
}

std::vector<Status> RunOnThreads(InProcessFabric& fabric,
                                 const std::function<Status(Transport&)>& body) {
  const int size = fabric.size();
  std::vector<Status> statuses(size);
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&fabric, &body, &statuses, rank] {
      Status status = body(fabric.transport(rank));
      if (!status.ok()) {
        fabric.Abort("rank " + std::to_string(rank) +
                     " failed: " + status.message());
      }
      statuses[rank] = std::move(status);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

std::vector<Status> RunOnThreads(int size,
                                 const std::function<Status(Transport&)>& body) {
  InProcessFabric fabric(size);
  return RunOnThreads(fabric, body);
}

}  // namespace tfdist
