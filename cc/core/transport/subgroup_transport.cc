#include "cc/core/transport/subgroup_transport.h"

#include <algorithm>
#include <utility>

namespace tfdist {

SubgroupTransport::SubgroupTransport(Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  const auto self = std::find(members_.begin(), members_.end(), parent_.rank());
  rank_ = static_cast<int>(self - members_.begin());
}

std::unique_ptr<PendingOp> SubgroupTransport::StartSend(int peer, const void* data,
                                                        size_t bytes, int tag) {
  return parent_.StartSend(members_[peer], data, bytes, tag);
}

std::unique_ptr<PendingOp> SubgroupTransport::StartRecv(int peer, void* data, size_t bytes,
                                                        int tag) {
  return parent_.StartRecv(members_[peer], data, bytes, tag);
}

Status SubgroupTransport::SendRecv(int send_peer, const void* send_data, size_t send_bytes,
                                   int recv_peer, void* recv_data, size_t recv_bytes, int tag) {
  return parent_.SendRecv(members_[send_peer], send_data, send_bytes, members_[recv_peer],
                          recv_data, recv_bytes, tag);
}

}  // namespace tfdist
