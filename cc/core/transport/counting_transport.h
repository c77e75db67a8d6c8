// A Transport that forwards to another and counts the payload bytes this
// rank sends through it: tfdist.stats()'s bytes_sent, measured where the
// bytes go, so that it is right for every algorithm that runs over it.
#ifndef TFDIST_CORE_TRANSPORT_COUNTING_TRANSPORT_H_
#define TFDIST_CORE_TRANSPORT_COUNTING_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "cc/core/transport/transport.h"

namespace tfdist {

class CountingTransport : public Transport {
 public:
  // Adds every send's byte count to `bytes_sent`, which must outlive this.
  CountingTransport(Transport& inner, std::atomic<uint64_t>& bytes_sent)
      : inner_(inner), bytes_sent_(bytes_sent) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  bool AllowsConcurrentCalls() const override { return inner_.AllowsConcurrentCalls(); }

  std::unique_ptr<PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                       int tag) override {
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    return inner_.StartSend(peer, data, bytes, tag);
  }
  std::unique_ptr<PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                       int tag) override {
    return inner_.StartRecv(peer, data, bytes, tag);
  }
  Status SendRecv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                  void* recv_data, size_t recv_bytes, int tag) override {
    bytes_sent_.fetch_add(send_bytes, std::memory_order_relaxed);
    return inner_.SendRecv(send_peer, send_data, send_bytes, recv_peer, recv_data, recv_bytes,
                           tag);
  }

 private:
  Transport& inner_;
  std::atomic<uint64_t>& bytes_sent_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_COUNTING_TRANSPORT_H_
