// Butterfly allreduce (recursive doubling).
//
// For P a power of two: in round k = 0 .. log2(P)-1 every rank exchanges its
// whole current vector with rank XOR 2^k and reduces what it receives into
// its own. After log2(P) rounds every rank holds the full result. Partners
// combine the same two operands (a op b versus b op a, and every op is
// commutative), so all ranks end with identical bits.
// Other P: PowerOfTwoFold (power_of_two_fold.h) folds the extra ranks into
// partners first and sends them the result afterwards.
//
// Steps: log2(p2) exchange rounds (+ 2 fold messages when P != p2).
// Bytes on the wire per rank: sends and receives m per round, m*log2(p2) in
// total (+ m for fold partners).
// Time: T_bfly = log2(p2) * (L + m*G + m*R) (+ 2(L + m*G) + m*R for the
// fold), with R the seconds per byte reduced (docs/algorithms.md's table,
// cost_model.h): the fewest rounds, so the best for small, latency-bound
// messages.
// Out of place, the first round reads the input where it lies and writes
// input (op) received into the output: no separate pass copies the input.
#include "cc/core/collectives/butterfly_allreduce.h"

#include "cc/core/transport/collective_tags.h"
#include "cc/core/collectives/power_of_two_fold.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/thread_scratch.h"
#include "cc/core/collectives/without_peers.h"

namespace tfdist {

Status ButterflyAllreduce(Transport& transport, const void* input, void* output,
                          size_t count, DataType dtype, ReduceOp op, double result_scale) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const size_t bytes = count * DataTypeSize(dtype);
  if (CompletedWithoutPeers(transport, input, output, count, dtype, result_scale)) {
    return Status::OK();
  }

  unsigned char* incoming = ThreadScratch(bytes);
  const PowerOfTwoFold fold(transport.rank(), transport.size());
  TFDIST_RETURN_IF_ERROR(fold.Fold(transport, input, output, incoming, count, dtype, op));
  if (fold.participates()) {
    // This rank's vector: the input until the first reduction writes the
    // output (out = in op received), the output from then on.
    const void* current = fold.PhaseInput(input, output);
    for (int mask = 1; mask < fold.group_size(); mask <<= 1) {
      const int peer = fold.RealRank(fold.virtual_rank() ^ mask);
      TFDIST_RETURN_IF_ERROR(transport.SendRecv(peer, current, bytes, peer,
                                                incoming, bytes, kButterflyTag));
      // The last round completes the result: it applies the scale too.
      const bool last = (mask << 1) >= fold.group_size();
      ReduceOutOfPlace(output, current, incoming, count, dtype, op,
                       last ? result_scale : 1.0);
      current = output;
    }
  }
  return fold.Unfold(transport, output, bytes);
}

}  // namespace tfdist
