// Tree allreduce: binomial-tree reduce to rank 0, then binomial broadcast.
//
// Reduce (binomial_reduce.h): in round k (k = 0, 1, ...), a rank whose lowest
// set bit is 2^k sends its partial result to rank - 2^k and is done; a rank
// with bit k clear receives from rank + 2^k (if that rank exists) and reduces
// into its buffer. After ceil(log2 P) rounds rank 0 holds the result, which
// BinomialBroadcast (broadcast.cc) then sends back down the same tree.
//
// Steps: 2 * ceil(log2 P) rounds, each moving the full vector.
// Bytes on the wire per rank: every non-root sends m once and receives m once
// (the broadcast); a rank with c children also receives c*m and sends c*m;
// rank 0 receives and sends m * ceil(log2 P).
// Time: T_tree = 2*ceil(log2 P) * (L + m*G) + ceil(log2 P) * m*R, with R the
// seconds per byte reduced (docs/algorithms.md's table, cost_model.h). A baseline:
// butterfly does the same work in half the rounds.
// Out of place, a rank sends its input where it lies until its first
// receive, which writes input (op) received into the output; leaves never
// touch their output until the broadcast fills it.
#include "cc/core/collectives/tree_allreduce.h"

#include "cc/core/collectives/binomial_reduce.h"
#include "cc/core/collectives/broadcast.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/thread_scratch.h"
#include "cc/core/collectives/without_peers.h"

namespace tfdist {

Status TreeAllreduce(Transport& transport, const void* input, void* output,
                     size_t count, DataType dtype, ReduceOp op, double result_scale) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const size_t bytes = count * DataTypeSize(dtype);
  if (CompletedWithoutPeers(transport, input, output, count, dtype, result_scale)) {
    return Status::OK();
  }

  unsigned char* incoming = ThreadScratch(bytes);
  TFDIST_RETURN_IF_ERROR(BinomialReduceToRankZero(
      transport, input, output, incoming, bytes, kTreeReduceTag,
      [&](const void* current, bool last) {
        // Rank 0's last combination completes the result: it scales it once,
        // and the broadcast hands the same bits to everyone.
        ReduceOutOfPlace(output, current, incoming, count, dtype, op,
                         last ? result_scale : 1.0);
      }));
  // Every rank but 0 receives the result into its output here, whatever it
  // held; rank 0 has received at least once (P >= 2), so its output holds it.
  return BinomialBroadcast(transport, output, bytes, /*root=*/0);
}

}  // namespace tfdist
