// Ring reduce-scatter.
//
// Block r (counts_per_rank[r] elements) is the part rank r keeps. In steps
// t = 0 .. P-2 rank r sends block (r - t - 1) to rank r+1 and receives block
// (r - t - 2) from rank r-1, reducing it into its buffer straight from the
// receive slot; the block it receives in the last step is its own, r, now
// reduced over all ranks. Blocks move as pipelined segments of at most 1 MiB
// with the next receive in flight while one is reduced (ring_pipeline.h).
//
// Steps: P-1.  Bytes on the wire per rank: every block but one, about
// m(P-1)/P for equal blocks (m = the whole buffer).
// Time: (P-1) * (L + (m/P)*G).
#include "cc/core/collectives/reducescatter.h"

#include <string>

#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/ring_pipeline.h"

namespace tfdist {

Status RingReducescatter(Transport& transport, void* buffer,
                         const std::vector<size_t>& counts_per_rank,
                         DataType dtype, ReduceOp op) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const int size = transport.size();
  if (static_cast<int>(counts_per_rank.size()) != size) {
    return Status::InvalidArgument(
        "reducescatter needs one count per rank: got " +
        std::to_string(counts_per_rank.size()) + " for " +
        std::to_string(size) + " ranks");
  }

  RingSchedule schedule;
  schedule.element_size = DataTypeSize(dtype);
  schedule.chunk_offsets.resize(size + 1, 0);
  for (int block = 0; block < size; ++block) {
    schedule.chunk_offsets[block + 1] =
        schedule.chunk_offsets[block] +
        counts_per_rank[block] * schedule.element_size;
  }
  if (schedule.chunk_offsets[size] == 0) return Status::OK();
  schedule.shift = -1;
  schedule.reduce_steps = size - 1;
  schedule.dtype = dtype;
  schedule.op = op;
  schedule.tag = kReducescatterTag;
  return RunRingSchedule(transport, buffer, schedule);
}

}  // namespace tfdist
