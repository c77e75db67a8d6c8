// One way to run a group of fused allreduces. CollectiveExecutor holds an
// ordered list of plans and runs a group with the first whose Applies()
// holds (as Horovod's OperationManager picks among its AllreduceOps), so
// each path's condition sits beside the path and the order alone settles
// which wins where several would do.
#ifndef TFDIST_CORE_RUNTIME_ALLREDUCE_PLAN_H_
#define TFDIST_CORE_RUNTIME_ALLREDUCE_PLAN_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/runtime/request.h"

namespace tfdist {

// What the plans decide by. It comes from the tensors' descriptions alone,
// the same on every rank, so every rank picks the same plan: what goes on
// the wire depends on it.
struct AllreduceGroup {
  const std::vector<Request*>& requests;
  // The first member's: fusion.h let only members that reduce the same way
  // (the fields request.h marks fusion_key) share a group.
  const TensorDescription& description;
  size_t bytes;                   // the group's total in the accumulation type
  bool has_large;                 // a member is reduced where it lies (fusion.h)
  AllreduceAlgorithm algorithm;   // the one `bytes` resolves to
};

class AllreducePlan {
 public:
  virtual ~AllreducePlan() = default;
  // Whether this plan can run `group`; plans earlier in the list had their say.
  virtual bool Applies(const AllreduceGroup& group) const = 0;
  virtual Status Run(const AllreduceGroup& group) = 0;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_ALLREDUCE_PLAN_H_
