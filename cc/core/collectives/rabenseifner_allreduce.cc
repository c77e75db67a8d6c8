// Rabenseifner allreduce: recursive-halving reduce-scatter, then
// recursive-doubling allgather.
//
// For P a power of two, the vector is split into P chunks (chunk_layout.h).
// Each rank keeps a window of chunks, initially all P of them.
//  1. Reduce-scatter, for d = P/2, P/4, ..., 1: rank v pairs with v XOR d,
//     keeps the half of its window that contains chunk v, sends the other
//     half to the partner and reduces the partner's copy of the kept half
//     into its buffer (straight from the receive buffer). After log2(P)
//     rounds rank v owns the fully reduced chunk v.
//  2. Allgather, for d = 1, 2, ..., P/2: rank v sends its window to v XOR d
//     and receives the partner's (adjacent, equally long) window straight into
//     place, doubling the window.
// Each chunk is reduced on exactly one rank and then copied, so every rank
// ends with the same bits.
// Other P: PowerOfTwoFold (power_of_two_fold.h) folds the extra ranks first.
// Out of place, the first halving round sends from the input and writes
// input (op) received into the kept half of the output; the allgather fills
// the rest. The input is never copied into the output as a pass of its own.
//
// Steps: 2 * log2(p2) rounds (+ 2 fold messages of the full vector when
// P != p2). Bytes on the wire per rank: sends m/2 + m/4 + ... = m*(p2-1)/p2
// in each phase, 2m*(p2-1)/p2 in all (+ m for fold partners).
// Time: T_rabe = 2L*log2(p2) + 2*m*G*(p2-1)/p2 + (p2-1)/p2 * m*R (+ the
// fold, as butterfly's), with R the seconds per byte reduced (docs/algorithms.md's
// table, cost_model.h): latency like butterfly x2, bandwidth at the lower
// bound, the best over most of the range.
#include "cc/core/collectives/rabenseifner_allreduce.h"

#include <algorithm>

#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/collectives/power_of_two_fold.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/thread_scratch.h"
#include "cc/core/collectives/without_peers.h"

namespace tfdist {

Status RabenseifnerAllreduce(Transport& transport, const void* input, void* output,
                             size_t count, DataType dtype, ReduceOp op, double result_scale) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const size_t element_size = DataTypeSize(dtype);
  if (CompletedWithoutPeers(transport, input, output, count, dtype, result_scale)) {
    return Status::OK();
  }

  unsigned char* data = static_cast<unsigned char*>(output);
  // The fold needs the whole vector; the halving phase at most half of it.
  unsigned char* incoming = ThreadScratch(count * element_size);
  const PowerOfTwoFold fold(transport.rank(), transport.size());
  TFDIST_RETURN_IF_ERROR(fold.Fold(transport, input, output, incoming, count, dtype, op));

  if (fold.participates()) {
    const int parts = fold.group_size();
    const int self = fold.virtual_rank();
    // Chunks [lo, hi) as element offsets and byte counts.
    auto begin_of = [&](int chunk) { return ChunkBegin(count, parts, chunk); };
    auto offset_of = [&](int chunk) { return begin_of(chunk) * element_size; };
    auto bytes_of = [&](int lo, int hi) {
      return (begin_of(hi) - begin_of(lo)) * element_size;
    };

    // This rank's vector: the input until the first halving round writes
    // the kept half of the output (out = in op received), the output after.
    // The half given away in that round is written by the allgather.
    const unsigned char* current =
        static_cast<const unsigned char*>(fold.PhaseInput(input, output));
    int lo = 0;
    int hi = parts;
    for (int distance = parts / 2; distance >= 1; distance /= 2) {
      const int peer = fold.RealRank(self ^ distance);
      const int mid = lo + distance;
      const bool keep_upper = (self & distance) != 0;
      const int keep_lo = keep_upper ? mid : lo;
      const int keep_hi = keep_upper ? hi : mid;
      const int give_lo = keep_upper ? lo : mid;
      const int give_hi = keep_upper ? mid : hi;
      TFDIST_RETURN_IF_ERROR(transport.SendRecv(
          peer, current + offset_of(give_lo), bytes_of(give_lo, give_hi), peer,
          incoming, bytes_of(keep_lo, keep_hi), kRabenseifnerTag));
      // The last round completes this rank's chunk, which it scales once
      // before the allgather hands it on.
      ReduceOutOfPlace(data + offset_of(keep_lo), current + offset_of(keep_lo), incoming,
                       begin_of(keep_hi) - begin_of(keep_lo), dtype, op,
                       distance == 1 ? result_scale : 1.0);
      current = data;
      lo = keep_lo;
      hi = keep_hi;
    }

    for (int distance = 1; distance < parts; distance *= 2) {
      const int peer = fold.RealRank(self ^ distance);
      const bool peer_above = (self & distance) == 0;
      const int peer_lo = peer_above ? hi : lo - distance;
      const int peer_hi = peer_above ? hi + distance : lo;
      TFDIST_RETURN_IF_ERROR(transport.SendRecv(
          peer, data + offset_of(lo), bytes_of(lo, hi), peer,
          data + offset_of(peer_lo), bytes_of(peer_lo, peer_hi),
          kRabenseifnerTag));
      lo = std::min(lo, peer_lo);
      hi = std::max(hi, peer_hi);
    }
  }
  return fold.Unfold(transport, output, count * element_size);
}

}  // namespace tfdist
