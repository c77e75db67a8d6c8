#include "cc/core/control/transport_control_plane.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/transport/collective_tags.h"

namespace tfdist {

TransportControlPlane::TransportControlPlane(Transport& transport, AbortAction abort)
    : transport_(transport), abort_(std::move(abort)) {}

Status TransportControlPlane::AndAllreduce(uint64_t* words, size_t count, WaitKind) {
  // Recursive doubling: every rank ANDs with a partner at distance 1, 2, 4,
  // ..., each step one exchange, so that a round costs log2 P message
  // latencies rather than the 2 log2 P of a reduce to rank 0 and a broadcast
  // back (at P = 2, one crossing of the link instead of two). Beyond the
  // largest power of two p2, rank p2 + i first hands its words to rank i and
  // gets the answer back at the end (two more messages, one more latency:
  // rank i's first peer sends while the words travel).
  const int me = rank();
  const int p = size();
  if (p == 1 || count == 0) return Status::OK();
  const size_t bytes = count * sizeof(uint64_t);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  if (me >= p2) {
    TFDIST_RETURN_IF_ERROR(transport_.Send(me - p2, words, bytes, kControlReduceTag));
    return transport_.Recv(me - p2, words, bytes, kControlResultTag);
  }
  std::vector<uint64_t> incoming(count);
  auto fold_in = [&] {
    for (size_t i = 0; i < count; ++i) words[i] &= incoming[i];
  };
  if (me + p2 < p) {
    TFDIST_RETURN_IF_ERROR(transport_.Recv(me + p2, incoming.data(), bytes, kControlReduceTag));
    fold_in();
  }
  for (int distance = 1; distance < p2; distance <<= 1) {
    const int partner = me ^ distance;
    TFDIST_RETURN_IF_ERROR(transport_.SendRecv(partner, words, bytes, partner, incoming.data(),
                                               bytes, kControlReduceTag));
    fold_in();
  }
  if (me + p2 < p) {
    TFDIST_RETURN_IF_ERROR(transport_.Send(me + p2, words, bytes, kControlResultTag));
  }
  return Status::OK();
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
