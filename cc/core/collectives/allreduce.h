// Allreduce over a Transport with a named algorithm, in place or out of place. Every algorithm
// accepts any group size P >= 1, count 0 and count < P, and every reducible
// DataType (float16/bfloat16 are reduced pairwise through float32).
#ifndef TFDIST_CORE_COLLECTIVES_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_ALLREDUCE_H_

#include <cstddef>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// `algorithm` must be kTree, kButterfly, kRing, kRabenseifner or
// kHierarchical; kAuto, kMpi, kSharedMemory and kHierarchicalSharedMemory are resolved
// by the caller (the runtime)
// before it gets here. `layout` (which host each rank is on) and `planner`
// (tuning/hierarchical_planner.h: the cost model's choices) are what
// kHierarchical needs; the flat algorithms ignore them.
Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    const HostLayout& layout, const HierarchicalPlanner& planner,
                    void* buffer, size_t count, DataType dtype, ReduceOp op);

// Out of place: every algorithm reads `input` where it lies (never writing
// it) and leaves the result in `output`, without first copying one into the
// other as a pass of its own. `input == output` is in place; otherwise the
// two must not overlap. Every element of the result is multiplied by
// `result_scale` (ConvertScaled's rounding), inside the algorithm where it
// can be (each completed piece once, so every rank has the same bits):
// averaging then costs no pass of its own. Every rank passes the same scale.
Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    const HostLayout& layout, const HierarchicalPlanner& planner,
                    const void* input, void* output, size_t count, DataType dtype,
                    ReduceOp op, double result_scale = 1.0);

// The same with every rank on one host (kHierarchical then reduces within
// it: a reduce-scatter and an allgather).
Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    void* buffer, size_t count, DataType dtype, ReduceOp op);
Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport, const void* input,
                    void* output, size_t count, DataType dtype, ReduceOp op,
                    double result_scale = 1.0);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_ALLREDUCE_H_
