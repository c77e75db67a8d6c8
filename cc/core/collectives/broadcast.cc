// Binomial-tree broadcast.
//
// Ranks are renumbered relative to the root, v = (rank - root) mod P. Rank v
// receives the whole buffer once, from v minus its lowest set bit, then sends
// it to v + 2^k for every 2^k below that bit (largest first, so the far
// subtrees start early) with v + 2^k < P. The root has no set bit and sends to
// 1, 2, 4, ... up to the largest power of two below P.
//
// Steps: ceil(log2 P) rounds.  Bytes on the wire per rank: receives m once
// (root: 0); sends m to each child, at most ceil(log2 P) times (the root).
// Time: ceil(log2 P) * (L + m*G).
#include "cc/core/collectives/broadcast.h"

#include <memory>
#include <string>
#include <vector>

namespace tfdist {

Status BinomialBroadcast(Transport& transport, void* buffer, size_t bytes,
                         int root, int tag) {
  const int size = transport.size();
  const int rank = transport.rank();
  if (root < 0 || root >= size) {
    return Status::InvalidArgument("broadcast root " + std::to_string(root) +
                                   " outside a group of " + std::to_string(size));
  }
  if (size == 1 || bytes == 0) return Status::OK();

  const int virtual_rank = (rank - root + size) % size;
  auto real_rank = [&](int v) { return (v + root) % size; };

  // Receive from the parent: virtual_rank minus its lowest set bit.
  int mask = 1;
  while (mask < size) {
    if (virtual_rank & mask) {
      TFDIST_RETURN_IF_ERROR(transport.Recv(real_rank(virtual_rank - mask),
                                            buffer, bytes, tag));
      break;
    }
    mask <<= 1;
  }
  // Forward to the children, all in flight at once.
  std::vector<std::unique_ptr<PendingOp>> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (virtual_rank + mask < size) {
      sends.push_back(transport.StartSend(real_rank(virtual_rank + mask), buffer,
                                          bytes, tag));
    }
  }
  Status result;
  for (auto& send : sends) {
    Status status = send->Wait();
    if (result.ok()) result = status;
  }
  return result;
}

}  // namespace tfdist
