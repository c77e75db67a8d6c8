#ifndef TFDIST_CORE_COLLECTIVES_RING_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_RING_ALLREDUCE_H_

#include <cstddef>
#include <vector>

#include "cc/core/collectives/ring_pipeline.h"
#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// In-place allreduce of `count` elements of `buffer`; see ring_allreduce.cc
// for the steps and their cost. Any group size, any count (0 included).
Status RingAllreduce(Transport& transport, void* buffer, size_t count,
                     DataType dtype, ReduceOp op);

// Allreduce of the concatenation of `spans` as one vector (each span in
// place, or out of place from its own source): tensors of any size in one
// ring, none copied into a shared buffer. Out of place saves the caller a
// copy of the input into the output. Every element of the result is
// multiplied by `result_scale` (ConvertScaled's rounding) as part of the
// ring, which saves a pass over the output when averaging.
// `max_segment_bytes` as below.
Status RingAllreduceSpans(Transport& transport, const std::vector<RingSpan>& spans,
                          DataType dtype, ReduceOp op, double result_scale = 1.0,
                          size_t max_segment_bytes = kDefaultRingSegmentBytes);

// Wire compression: allreduces `count` elements of `input` (`full_dtype`,
// each multiplied by `input_scale`) into `output`, with the ring moving and
// reducing them as `wire_dtype` (float16 or bfloat16) in `wire_buffer`
// (count elements of wire_dtype). The rounding to the wire type happens as
// each segment is first needed and the widening as each is final
// (ring_pipeline.h): the same bits as converting the whole input first,
// ring-allreducing the wire buffer and converting it back, in fewer passes.
Status RingAllreduceCompressed(Transport& transport, const void* input, DataType full_dtype,
                               double input_scale, void* wire_buffer, DataType wire_dtype,
                               void* output, size_t count, ReduceOp op,
                               size_t max_segment_bytes = kDefaultRingSegmentBytes);

// The same with an explicit segment bound instead of kDefaultRingSegmentBytes
// (1 MiB, ring_pipeline.h); every rank must pass the same value. Tests use tiny segments to
// exercise the pipeline without huge buffers.
Status RingAllreduceWithSegments(Transport& transport, void* buffer,
                                 size_t count, DataType dtype, ReduceOp op,
                                 size_t max_segment_bytes);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_RING_ALLREDUCE_H_
