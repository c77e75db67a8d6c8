#ifndef TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_

#include <cstddef>

#include "cc/core/tuning/cost_model.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Two-level allreduce, pipelined in segments; see hierarchical_allreduce.cc.
// `layout` describes the ranks of `transport` and must be uniform (every
// host the same number of ranks; InvalidArgument otherwise). `network` is
// the two link classes, from which the cost model picks the segment count
// and each cross-host group its flat algorithm; every rank must pass the
// same values. Reads `input` once and leaves the result in `output`
// (`count` elements each); `input == output` is in place, otherwise the two
// must not overlap. `segments` > 0 forces that many pipeline segments
// (tests); 0 takes the cost model's HierarchicalSegments.
Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                             const NetworkCost& network, const void* input, void* output,
                             size_t count, DataType dtype, ReduceOp op, int segments = 0);

// In place.
inline Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                                    const NetworkCost& network, void* buffer, size_t count,
                                    DataType dtype, ReduceOp op) {
  return HierarchicalAllreduce(transport, layout, network, buffer, buffer, count, dtype, op);
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
