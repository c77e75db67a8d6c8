// Ring allreduce: reduce-scatter then allgather around a ring, segmented.
//
// The vector is split into P chunks (chunk_layout.h). Rank r sends to r+1 and
// receives from r-1 (mod P).
//  1. Reduce-scatter, steps t = 0 .. P-2: rank r sends chunk (r - t) and
//     receives chunk (r - t - 1), which it reduces into its buffer straight
//     from the receive slot. After P-1 steps rank r owns the reduced chunk r+1.
//  2. Allgather, steps t = P-1 .. 2P-3: the same pattern, but received
//     chunks are final and land directly in place.
// Chunks travel as segments of at most 1 MiB; a segment is forwarded as soon
// as it is reduced, and the next segment's receive is posted before the
// current one is reduced, so reduction overlaps transfer (ring_pipeline.h).
// Each chunk is reduced along one path and then copied, so every rank ends
// with the same bits.
//
// Steps: 2(P-1) (times ceil(chunk / 1 MiB) segments each).
// Bytes on the wire per rank: sends and receives (P-1)/P * m in each phase,
// 2m(P-1)/P in all: the bandwidth lower bound.
// Time: T_ring = 2(P-1) * (L + (m/P)*G): best for large m and small P, its
// latency term grows linearly in P.
#include "cc/core/collectives/ring_allreduce.h"

#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/collectives/collective_tags.h"
#include "cc/core/collectives/reduction.h"
#include "cc/core/convert.h"

namespace tfdist {
namespace {

Status RunRing(Transport& transport, const void* input, void* buffer,
               size_t count, DataType dtype, ReduceOp op,
               size_t max_segment_bytes, double result_scale) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const int size = transport.size();
  if (input == buffer) input = nullptr;  // in place
  if (size == 1 || count == 0) {
    // The reduction of one rank is its input; only the scale remains.
    if (input != nullptr || result_scale != 1.0) {
      ConvertScaled(input != nullptr ? input : buffer, dtype, buffer, dtype, count,
                    result_scale);
    }
    return Status::OK();
  }

  RingSchedule schedule;
  schedule.element_size = DataTypeSize(dtype);
  schedule.chunk_offsets.resize(size + 1);
  for (int chunk = 0; chunk <= size; ++chunk) {
    schedule.chunk_offsets[chunk] =
        ChunkBegin(count, size, chunk) * schedule.element_size;
  }
  schedule.shift = 0;
  schedule.reduce_steps = size - 1;
  schedule.copy_steps = size - 1;
  schedule.dtype = dtype;
  schedule.op = op;
  schedule.max_segment_bytes = max_segment_bytes;
  schedule.tag = kRingAllreduceTag;
  schedule.source = static_cast<const unsigned char*>(input);
  schedule.result_scale = result_scale;
  return RunRingSchedule(transport, buffer, schedule);
}

}  // namespace

Status RingAllreduceWithSegments(Transport& transport, void* buffer,
                                 size_t count, DataType dtype, ReduceOp op,
                                 size_t max_segment_bytes) {
  return RunRing(transport, nullptr, buffer, count, dtype, op, max_segment_bytes, 1.0);
}

Status RingAllreduce(Transport& transport, void* buffer, size_t count,
                     DataType dtype, ReduceOp op) {
  return RunRing(transport, nullptr, buffer, count, dtype, op,
                 kDefaultRingSegmentBytes, 1.0);
}

Status RingAllreduceOutOfPlace(Transport& transport, const void* input,
                               void* output, size_t count, DataType dtype,
                               ReduceOp op, double result_scale) {
  return RunRing(transport, input, output, count, dtype, op,
                 kDefaultRingSegmentBytes, result_scale);
}

}  // namespace tfdist
