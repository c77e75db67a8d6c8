// Hierarchical allreduce's two choices (collectives/hierarchical_allreduce.h)
// made by the cost model: the segment count is HierarchicalSegments, and a
// cross-host group of H ranks, one per host, runs the flat algorithm
// ChooseAllreduce picks for H hosts of one rank each.
#ifndef TFDIST_CORE_TUNING_HIERARCHICAL_PLANNER_H_
#define TFDIST_CORE_TUNING_HIERARCHICAL_PLANNER_H_

#include <cstddef>

#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/tuning/cost_model.h"
#include "cc/core/tuning/step_costs.h"

namespace tfdist {

// Holds `network` by reference: it must outlive the planner (a temporary
// made for one call, typically).
class CostModelPlanner final : public HierarchicalPlanner {
 public:
  explicit CostModelPlanner(const NetworkCost& network) : network_(network) {}

  int Segments(const HostLayout& layout, size_t bytes) const override {
    return HierarchicalSegments(layout, bytes, network_);
  }
  AllreduceAlgorithm CrossAlgorithm(int hosts, size_t bytes) const override {
    return ChooseAllreduce(HostLayout::Consecutive(hosts, hosts), bytes, network_);
  }

 private:
  const NetworkCost& network_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_HIERARCHICAL_PLANNER_H_
