#ifndef TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/collectives/algorithm.h"
#include "cc/core/collectives/ring_pipeline.h"
#include "cc/core/collectives/shared_memory_allreduce.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// The two choices hierarchical allreduce leaves to a cost model
// (tuning/hierarchical_planner.h), so that the algorithm does not depend on
// the model. Both must be deterministic: every rank asks with the same
// arguments and must get the same answer.
class HierarchicalPlanner {
 public:
  virtual ~HierarchicalPlanner() = default;
  // How many pipeline segments (>= 1) to cut `bytes` into on `layout`.
  virtual int Segments(const HostLayout& layout, size_t bytes) const = 0;
  // The flat algorithm for an allreduce of `bytes` among `hosts` ranks, one
  // on each host.
  virtual AllreduceAlgorithm CrossAlgorithm(int hosts, size_t bytes) const = 0;
};

// Two-level allreduce, pipelined in segments; see hierarchical_allreduce.cc.
// `layout` describes the ranks of `transport` and must be uniform (every
// host the same number of ranks; InvalidArgument otherwise). `planner`
// picks the segment count and each cross-host group its flat algorithm. Reads `input` once and leaves the result in `output`
// (`count` elements each); `input == output` is in place, otherwise the two
// must not overlap. `segments` > 0 forces that many pipeline segments
// (tests); 0 takes the planner's.
Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                             const HierarchicalPlanner& planner, const void* input, void* output,
                             size_t count, DataType dtype, ReduceOp op, int segments = 0);

// The same with the phases within a host on the host's shared memory
// (shared_memory_allreduce.h, AllreduceSpansAcrossHosts): `host_memory`
// runs over this rank's host's ranks, in local-rank order, on a segment of
// their own. The phase across hosts goes over `transport` (whose ranks
// `layout` describes; more than one host) with the planner's flat
// algorithm, a chunk at a time, each chunk (the planner's segment, at most
// a slot) overlapping the next one's reduction within the host. Scales the
// result by `result_scale` while copying it out. `segments` as above.
Status HierarchicalAllreduceOverSharedMemory(SharedMemoryAllreduce& host_memory,
                                             Transport& transport, const HostLayout& layout,
                                             const HierarchicalPlanner& planner,
                                             const void* input, void* output, size_t count,
                                             DataType dtype, ReduceOp op, double result_scale,
                                             int segments = 0);
// The same over `spans` (ring_pipeline.h's RingSpan: each read from its
// source, or in place, and written where it lies), reduced as one buffer:
// a group's large tensors and its packed small ones in one collective, as
// the flat "shm" and the ring run them. Every rank's spans must add up to
// the same bytes, a multiple of the element size.
Status HierarchicalAllreduceSpansOverSharedMemory(SharedMemoryAllreduce& host_memory,
                                                  Transport& transport, const HostLayout& layout,
                                                  const HierarchicalPlanner& planner,
                                                  const std::vector<RingSpan>& spans,
                                                  DataType dtype, ReduceOp op,
                                                  double result_scale, int segments = 0);

// In place.
inline Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                                    const HierarchicalPlanner& planner, void* buffer,
                                    size_t count, DataType dtype, ReduceOp op) {
  return HierarchicalAllreduce(transport, layout, planner, buffer, buffer, count, dtype, op);
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_HIERARCHICAL_ALLREDUCE_H_
