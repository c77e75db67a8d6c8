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

#include <cstring>

#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/collectives/collective_tags.h"
#include "cc/core/collectives/reduction.h"

namespace tfdist {
namespace {

Status RunRing(Transport& transport, const void* input, void* buffer,
               size_t count, DataType dtype, ReduceOp op,
               size_t max_segment_bytes) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const int size = transport.size();
  if (input != nullptr && size == 1 && count > 0) {
    std::memcpy(buffer, input, count * DataTypeSize(dtype));
  }
  if (size == 1 || count == 0) return Status::OK();

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
  return RunRingSchedule(transport, buffer, schedule);
}

}  // namespace

Status RingAllreduceWithSegments(Transport& transport, void* buffer,
                                 size_t count, DataType dtype, ReduceOp op,
                                 size_t max_segment_bytes) {
  return RunRing(transport, nullptr, buffer, count, dtype, op, max_segment_bytes);
}

Status RingAllreduce(Transport& transport, void* buffer, size_t count,
                     DataType dtype, ReduceOp op) {
  return RunRing(transport, nullptr, buffer, count, dtype, op,
                 kDefaultRingSegmentBytes);
}

Status RingAllreduceOutOfPlace(Transport& transport, const void* input,
                               void* output, size_t count, DataType dtype,
                               ReduceOp op) {
  return RunRing(transport, input, output, count, dtype, op,
                 kDefaultRingSegmentBytes);
}

}  // namespace tfdist
