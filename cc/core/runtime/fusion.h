// Which ready allreduces run as one collective. Tensors can share when they
// reduce the same way (the fields request.h marks fusion_key: dtype, op,
// scale factors, algorithm); a group holds
// at most `threshold_bytes` (measured in the accumulation type); a tensor
// larger than that runs alone. threshold 0 turns fusion off. Deterministic,
// so every rank forms the same groups from the same list.
#ifndef TFDIST_CORE_RUNTIME_FUSION_H_
#define TFDIST_CORE_RUNTIME_FUSION_H_

#include <cstddef>
#include <vector>

#include "cc/core/runtime/request.h"

namespace tfdist {

// Fusing saves a tensor one collective's fixed cost (a few µs of latency and
// bookkeeping, and a synchronisation of all ranks) and, packed into the
// fusion buffer, costs two copies. Above this size the copies cost more than
// they save (around 256 KiB a ring allreduce at np=2 on one machine costs
// about as much as the two copies; docs/runtime.md), so larger tensors are
// not packed: the
// executor runs one ring over the fusion buffer and them, each where it lies
// (ring_pipeline.h, RingSpan).
constexpr size_t kLargestFusedTensorBytes = size_t{256} << 10;

// What a tensor occupies in a fusion buffer: its elements in the wire type
// (request.h WireType: float16 and bfloat16 as float32 unless compressed).
size_t AccumulationBytes(const TensorDescription& description);

// Returns groups of indices into `descriptions`, in execution order. Every
// index appears exactly once; the members of grouped allgathers (any dtypes)
// and grouped reducescatters (as allreduces) fuse whatever their size;
// other collectives are groups of one.
std::vector<std::vector<size_t>> PlanFusion(
    const std::vector<const TensorDescription*>& descriptions,
    size_t threshold_bytes);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_FUSION_H_
