#include "cc/core/collectives/allreduce.h"

#include <string>

#include "cc/core/collectives/butterfly_allreduce.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/collectives/rabenseifner_allreduce.h"
#include "cc/core/collectives/ring_allreduce.h"
#include "cc/core/collectives/tree_allreduce.h"

namespace tfdist {

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    void* buffer, size_t count, DataType dtype, ReduceOp op) {
  return RunAllreduce(algorithm, transport, HostLayout(transport.size()),
                      UniformNetwork(kDefaultLinkCost), buffer, count, dtype, op);
}

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    const HostLayout& layout, const NetworkCost& network,
                    void* buffer, size_t count, DataType dtype, ReduceOp op) {
  switch (algorithm) {
    case AllreduceAlgorithm::kHierarchical:
      return HierarchicalAllreduce(transport, layout, network, buffer, count, dtype, op);
    case AllreduceAlgorithm::kTree:
      return TreeAllreduce(transport, buffer, count, dtype, op);
    case AllreduceAlgorithm::kButterfly:
      return ButterflyAllreduce(transport, buffer, count, dtype, op);
    case AllreduceAlgorithm::kRing:
      return RingAllreduce(transport, buffer, count, dtype, op);
    case AllreduceAlgorithm::kRabenseifner:
      return RabenseifnerAllreduce(transport, buffer, count, dtype, op);
    case AllreduceAlgorithm::kAuto:
    case AllreduceAlgorithm::kMpi:
      break;
  }
  return Status::InvalidArgument(
      std::string("RunAllreduce runs transport algorithms only, not '") +
      AllreduceAlgorithmName(algorithm) +
      "': the runtime resolves auto and mpi before calling it");
}

}  // namespace tfdist
