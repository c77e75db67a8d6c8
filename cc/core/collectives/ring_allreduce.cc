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
// Time: T_ring = 2(P-1) * (L + (m/P)*G) + (P-1)/P * m * max(0, R - G), with
// R the seconds per byte reduced (docs/algorithms.md's table, cost_model.h): a segment
// is reduced while the next one arrives, so reducing costs only what it is
// slower than the wire. Best for large m and small P; its latency term grows
// linearly in P.
#include "cc/core/collectives/ring_allreduce.h"

#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/convert.h"

namespace tfdist {
namespace {

// A full allreduce over `size` ranks: reduce-scatter then allgather, P-1 steps
// each, of `count` elements in equal chunks.
RingSchedule AllreduceSchedule(int size, size_t count, DataType dtype, ReduceOp op,
                               size_t max_segment_bytes) {
  RingSchedule schedule;
  schedule.element_size = DataTypeSize(dtype);
  schedule.chunk_offsets.resize(size + 1);
  for (int chunk = 0; chunk <= size; ++chunk) {
    schedule.chunk_offsets[chunk] = ChunkBegin(count, size, chunk) * schedule.element_size;
  }
  schedule.shift = 0;
  schedule.reduce_steps = size - 1;
  schedule.copy_steps = size - 1;
  schedule.dtype = dtype;
  schedule.op = op;
  schedule.max_segment_bytes = max_segment_bytes;
  schedule.tag = kRingAllreduceTag;
  return schedule;
}

Status RunRing(Transport& transport, const std::vector<RingSpan>& spans, DataType dtype,
               ReduceOp op, size_t max_segment_bytes, double result_scale) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  const int size = transport.size();
  const size_t element_size = DataTypeSize(dtype);
  size_t count = 0;
  for (const RingSpan& span : spans) count += span.bytes / element_size;
  if (size == 1 || count == 0) {
    // The reduction of one rank is its input; only the scale remains.
    for (const RingSpan& span : spans) {
      if (span.source != nullptr || result_scale != 1.0) {
        ConvertScaled(span.source != nullptr ? span.source : span.data, dtype, span.data,
                      dtype, span.bytes / element_size, result_scale);
      }
    }
    return Status::OK();
  }

  RingSchedule schedule = AllreduceSchedule(size, count, dtype, op, max_segment_bytes);
  schedule.result_scale = result_scale;
  return RunRingSchedule(transport, spans, schedule);
}

// One span, in place.
RingSpan WholeBuffer(void* buffer, size_t count, DataType dtype) {
  return {count * DataTypeSize(dtype), static_cast<unsigned char*>(buffer), nullptr};
}

}  // namespace

Status RingAllreduceCompressed(Transport& transport, const void* input, DataType full_dtype,
                               double input_scale, void* wire_buffer, DataType wire_dtype,
                               void* output, size_t count, ReduceOp op,
                               size_t max_segment_bytes) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(wire_dtype, op));
  const int size = transport.size();
  if (size == 1 || count == 0) {  // the same roundings, with nobody to send to
    ConvertScaled(input, full_dtype, wire_buffer, wire_dtype, count, input_scale);
    ConvertScaled(wire_buffer, wire_dtype, output, full_dtype, count, 1.0);
    return Status::OK();
  }
  RingSchedule schedule = AllreduceSchedule(size, count, wire_dtype, op, max_segment_bytes);
  schedule.full_source = static_cast<const unsigned char*>(input);
  schedule.full_result = static_cast<unsigned char*>(output);
  schedule.full_dtype = full_dtype;
  schedule.source_scale = input_scale;
  return RunRingSchedule(transport, wire_buffer, schedule);
}

Status RingAllreduceWithSegments(Transport& transport, void* buffer,
                                 size_t count, DataType dtype, ReduceOp op,
                                 size_t max_segment_bytes) {
  return RunRing(transport, {WholeBuffer(buffer, count, dtype)}, dtype, op,
                 max_segment_bytes, 1.0);
}

Status RingAllreduce(Transport& transport, void* buffer, size_t count,
                     DataType dtype, ReduceOp op) {
  return RunRing(transport, {WholeBuffer(buffer, count, dtype)}, dtype, op,
                 kDefaultRingSegmentBytes, 1.0);
}

Status RingAllreduceSpans(Transport& transport, const std::vector<RingSpan>& spans,
                          DataType dtype, ReduceOp op, double result_scale,
                          size_t max_segment_bytes) {
  return RunRing(transport, spans, dtype, op, max_segment_bytes, result_scale);
}

}  // namespace tfdist
