// Pairwise-exchange alltoallv.
//
// Rank r copies its own block locally, then in steps s = 1 .. P-1 sends its
// block for rank (r + s) and receives the block from rank (r - s) at the same
// time. Every rank talks to exactly one sender and one receiver per step, so
// no rank is flooded (the point of the pairwise schedule over posting all
// messages at once).
//
// Steps: P-1.  Bytes on the wire per rank: sum of its send blocks but its own,
// and the same for receives (about m(P-1)/P for equal blocks, m = its whole
// send buffer).  Time: (P-1) * L + m(P-1)/P * G.
#include "cc/core/collectives/alltoall.h"

#include <cstring>
#include <string>

#include "cc/core/transport/collective_tags.h"

namespace tfdist {
namespace {

std::vector<size_t> PrefixOffsets(const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) offsets[i + 1] = offsets[i] + sizes[i];
  return offsets;
}

}  // namespace

Status PairwiseAlltoallv(Transport& transport, const void* send,
                         const std::vector<size_t>& send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes) {
  const int size = transport.size();
  const int rank = transport.rank();
  if (static_cast<int>(send_bytes.size()) != size ||
      static_cast<int>(recv_bytes.size()) != size) {
    return Status::InvalidArgument(
        "alltoallv needs one send and one receive size per rank: got " +
        std::to_string(send_bytes.size()) + " and " +
        std::to_string(recv_bytes.size()) + " for " + std::to_string(size) +
        " ranks");
  }
  if (send_bytes[rank] != recv_bytes[rank]) {
    return Status::InvalidArgument(
        "alltoallv: rank " + std::to_string(rank) + " sends itself " +
        std::to_string(send_bytes[rank]) + " bytes but expects " +
        std::to_string(recv_bytes[rank]));
  }
  const auto* send_data = static_cast<const unsigned char*>(send);
  auto* recv_data = static_cast<unsigned char*>(recv);
  const std::vector<size_t> send_offsets = PrefixOffsets(send_bytes);
  const std::vector<size_t> recv_offsets = PrefixOffsets(recv_bytes);

  if (send_bytes[rank] > 0) {
    std::memcpy(recv_data + recv_offsets[rank], send_data + send_offsets[rank],
                send_bytes[rank]);
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const int from = (rank - step + size) % size;
    TFDIST_RETURN_IF_ERROR(transport.SendRecv(
        to, send_data + send_offsets[to], send_bytes[to], from,
        recv_data + recv_offsets[from], recv_bytes[from], kAlltoallTag));
  }
  return Status::OK();
}

}  // namespace tfdist
