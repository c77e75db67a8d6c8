// The segmented ring that ring allreduce, ring reduce-scatter and ring
// allgather all run on, so the pipelining logic exists once.
//
// The buffer is cut into P chunks (byte ranges given by the caller). In step
// t = 0, 1, ... every rank sends chunk (rank + shift - t) mod P to its right
// neighbour and receives chunk (rank + shift - t - 1) mod P from its left
// neighbour. The first `reduce_steps` steps reduce what arrives into the
// chunk; the `copy_steps` after them receive straight into it. The chunk a
// rank sends in step t+1 is the one it received in step t, so:
//  * allreduce: shift 0, P-1 reduce steps, then P-1 copy steps; after the
//    reduce steps rank r owns the reduced chunk r+1, which the copy steps
//    pass around the ring;
//  * reduce-scatter: shift -1, P-1 reduce steps; rank r ends owning chunk r;
//  * allgather: shift 0, P-1 copy steps.
//
// Segmentation (Gloo's scheme): each chunk travels as segments of at most
// max_segment_bytes. A segment is forwarded to the right as soon as it has
// been reduced (or has arrived, in copy steps), so the whole ring is a
// pipeline at segment granularity. In reduce steps two receives are in flight
// into two scratch slots: segment k+1 is arriving while segment k is reduced,
// straight from its slot into the user buffer.
#ifndef TFDIST_CORE_COLLECTIVES_RING_PIPELINE_H_
#define TFDIST_CORE_COLLECTIVES_RING_PIPELINE_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Gloo's segment bound: large enough to amortise per-message latency, small
// enough that the two in-flight segments stay in cache-sized scratch.
constexpr size_t kDefaultRingSegmentBytes = size_t{1} << 20;

// One piece of the vector a ring runs on, where it lies in memory. A ring
// over several spans treats them as one vector, in order: chunks and
// segments are cut from the whole (a segment never crosses a span's end), so
// tensors of any size reduce in one collective, each read and written where
// it lies, without first being copied into one buffer.
struct RingSpan {
  size_t bytes = 0;  // a multiple of the schedule's element_size
  unsigned char* data = nullptr;  // the result (and the input, in place)
  // Out of place (allreduce only): this rank's input, read once; `data`
  // receives the result without holding the input first. Step 0 sends from
  // it; a reduce step copies the segment from it into `data` just before
  // reducing into it, while it is in cache, which saves the caller a whole
  // pass copying input to output.
  const unsigned char* source = nullptr;
};

struct RingSchedule {
  // P + 1 non-decreasing byte offsets: chunk c is [offsets[c], offsets[c+1]).
  // Every boundary must be a multiple of element_size. Identical on all ranks.
  std::vector<size_t> chunk_offsets;
  size_t element_size = 1;
  int shift = 0;
  int reduce_steps = 0;
  int copy_steps = 0;
  DataType dtype = DataType::kUInt8;  // used by reduce steps only
  ReduceOp op = ReduceOp::kSum;       // used by reduce steps only
  size_t max_segment_bytes = kDefaultRingSegmentBytes;
  int tag = 0;
  // Allreduce only: every element of the fully reduced chunk is multiplied by
  // this (ConvertScaled's rounding) right after its last reduce step, while
  // it is in cache, and before it travels on. Averaging then costs no extra
  // pass over the result, and every rank still ends with the same bits.
  double result_scale = 1.0;
  // Wire compression (allreduce on one contiguous buffer only): the buffer
  // is the 16-bit wire copy, in `dtype`, of a tensor of `full_dtype` that
  // lies elsewhere. Each segment of this rank's `full_source` is converted
  // (times `source_scale`) into the buffer just before it is first sent or
  // reduced, and each segment of the result is widened into `full_result`
  // as soon as it is final, both while the segment is in cache: the cast
  // costs no pass of its own over the tensor.
  const unsigned char* full_source = nullptr;
  unsigned char* full_result = nullptr;
  DataType full_dtype = DataType::kFloat32;
  double source_scale = 1.0;
};

// Runs the schedule on one contiguous buffer, in place.
Status RunRingSchedule(Transport& transport, void* buffer,
                       const RingSchedule& schedule);

// Runs the schedule on the concatenation of `spans`. chunk_offsets index
// that concatenation; the last one must equal the spans' total bytes.
Status RunRingSchedule(Transport& transport, const std::vector<RingSpan>& spans,
                       const RingSchedule& schedule);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_RING_PIPELINE_H_
