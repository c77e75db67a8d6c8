#include "cc/core/control/transport_control_plane.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "cc/core/collectives/binomial_reduce.h"
#include "cc/core/collectives/broadcast.h"
#include "cc/core/transport/collective_tags.h"

namespace tfdist {

TransportControlPlane::TransportControlPlane(Transport& transport, AbortAction abort)
    : transport_(transport), abort_(std::move(abort)) {}

Status TransportControlPlane::AndAllreduce(uint64_t* words, size_t count, WaitKind) {
  const size_t bytes = count * sizeof(uint64_t);
  std::vector<uint64_t> incoming(count);
  TFDIST_RETURN_IF_ERROR(
      BinomialReduceToRankZero(transport_, words, incoming.data(), bytes, kControlReduceTag, [&] {
        for (size_t i = 0; i < count; ++i) words[i] &= incoming[i];
      }));
  return BinomialBroadcast(transport_, words, bytes, /*root=*/0, kControlResultTag);
}

Status TransportControlPlane::Allgatherv(const std::vector<uint8_t>& mine, WaitKind,
                                         std::vector<std::vector<uint8_t>>* per_rank) {
  const int me = rank();
  const int p = size();
  std::vector<uint64_t> sizes(p, 0);
  sizes[me] = mine.size();
  if (me != 0) {
    TFDIST_RETURN_IF_ERROR(
        transport_.Send(0, &sizes[me], sizeof(uint64_t), kControlGatherTag));
    TFDIST_RETURN_IF_ERROR(transport_.Send(0, mine.data(), mine.size(), kControlGatherTag));
  }
  per_rank->assign(p, {});
  if (me == 0) {
    (*per_rank)[0] = mine;
    for (int r = 1; r < p; ++r) {
      TFDIST_RETURN_IF_ERROR(
          transport_.Recv(r, &sizes[r], sizeof(uint64_t), kControlGatherTag));
      (*per_rank)[r].resize(sizes[r]);
      TFDIST_RETURN_IF_ERROR(
          transport_.Recv(r, (*per_rank)[r].data(), sizes[r], kControlGatherTag));
    }
  }
  TFDIST_RETURN_IF_ERROR(
      BinomialBroadcast(transport_, sizes.data(), p * sizeof(uint64_t), 0, kControlResultTag));
  // Rank 0 sends the concatenation down the tree; the others learn it.
  std::vector<uint8_t> all;
  if (me == 0) {
    for (const std::vector<uint8_t>& bytes : *per_rank) {
      all.insert(all.end(), bytes.begin(), bytes.end());
    }
  } else {
    size_t total = 0;
    for (uint64_t s : sizes) total += s;
    all.resize(total);
  }
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport_, all.data(), all.size(), 0, kControlResultTag));
  size_t offset = 0;
  for (int r = 0; r < p; ++r) {
    (*per_rank)[r].assign(all.begin() + offset, all.begin() + offset + sizes[r]);
    offset += sizes[r];
  }
  return Status::OK();
}

Status TransportControlPlane::Barrier(WaitKind) {
  const int me = rank();
  const int p = size();
  // Dissemination: after round k every rank has heard, through a chain, from
  // the 2^(k+1) - 1 ranks before it.
  for (int distance = 1; distance < p; distance <<= 1) {
    TFDIST_RETURN_IF_ERROR(transport_.SendRecv((me + distance) % p, nullptr, 0,
                                               (me - distance + p) % p, nullptr, 0,
                                               kControlBarrierTag));
  }
  return Status::OK();
}

void TransportControlPlane::Abort(const std::string& reason) {
  if (abort_) {
    abort_(reason);
    return;
  }
  std::fprintf(stderr, "tfdist (rank %d): aborting: %s\n", rank(), reason.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tfdist
