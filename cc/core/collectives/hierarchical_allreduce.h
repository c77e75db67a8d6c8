#ifndef TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_

#include <cstddef>

#include "cc/core/collectives/cost_model.h"
#include "cc/core/collectives/host_layout.h"
#include "cc/core/data_type.h"
#include "cc/core/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// In-place two-level allreduce; see hierarchical_allreduce.cc. `layout`
// describes the ranks of `transport` and must be uniform (every host the
// same number of ranks; InvalidArgument otherwise). `inter_host` is the
// link cost between hosts, from which each cross-host group picks its flat
// algorithm; every rank must pass the same values.
Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                             const LinkCost& inter_host, void* buffer, size_t count,
                             DataType dtype, ReduceOp op);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
