#include "cc/core/collectives/allreduce.h"

#include <string>

#include "cc/core/collectives/butterfly_allreduce.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/collectives/rabenseifner_allreduce.h"
#include "cc/core/collectives/ring_allreduce.h"
#include "cc/core/collectives/tree_allreduce.h"
#include "cc/core/numeric/convert.h"

namespace tfdist {
namespace {

// On one host hierarchical allreduce has no cross-host phase and nothing to
// pipeline, so it never asks; these are the answers that fit anyway.
class OneHostPlanner final : public HierarchicalPlanner {
 public:
  int Segments(const HostLayout&, size_t) const override { return 1; }
  AllreduceAlgorithm CrossAlgorithm(int, size_t) const override {
    return AllreduceAlgorithm::kButterfly;
  }
};

}  // namespace

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    void* buffer, size_t count, DataType dtype, ReduceOp op) {
  return RunAllreduce(algorithm, transport, buffer, buffer, count, dtype, op);
}

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport, const void* input,
                    void* output, size_t count, DataType dtype, ReduceOp op,
                    double result_scale) {
  return RunAllreduce(algorithm, transport, HostLayout(transport.size()), OneHostPlanner(),
                      input, output, count, dtype, op, result_scale);
}

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    const HostLayout& layout, const HierarchicalPlanner& planner,
                    void* buffer, size_t count, DataType dtype, ReduceOp op) {
  return RunAllreduce(algorithm, transport, layout, planner, buffer, buffer, count, dtype, op);
}

Status RunAllreduce(AllreduceAlgorithm algorithm, Transport& transport,
                    const HostLayout& layout, const HierarchicalPlanner& planner,
                    const void* input, void* output, size_t count, DataType dtype,
                    ReduceOp op, double result_scale) {
  switch (algorithm) {
    case AllreduceAlgorithm::kHierarchical: {
      // Hierarchical has no scale of its own: one pass over the result.
      TFDIST_RETURN_IF_ERROR(
          HierarchicalAllreduce(transport, layout, planner, input, output, count, dtype, op));
      if (result_scale != 1.0) {
        ConvertScaled(output, dtype, output, dtype, count, result_scale);
      }
      return Status::OK();
    }
    case AllreduceAlgorithm::kTree:
      return TreeAllreduce(transport, input, output, count, dtype, op, result_scale);
    case AllreduceAlgorithm::kButterfly:
      return ButterflyAllreduce(transport, input, output, count, dtype, op, result_scale);
    case AllreduceAlgorithm::kRing: {
      // One span, out of place from `input` unless it is the output itself.
      const RingSpan span{count * DataTypeSize(dtype), static_cast<unsigned char*>(output),
                          input == output ? nullptr
                                          : static_cast<const unsigned char*>(input)};
      return RingAllreduceSpans(transport, {span}, dtype, op, result_scale);
    }
    case AllreduceAlgorithm::kRabenseifner:
      return RabenseifnerAllreduce(transport, input, output, count, dtype, op, result_scale);
    case AllreduceAlgorithm::kAuto:
    case AllreduceAlgorithm::kMpi:
    case AllreduceAlgorithm::kSharedMemory:
    case AllreduceAlgorithm::kHierarchicalSharedMemory:
      break;
  }
  return Status::InvalidArgument(
      std::string("RunAllreduce runs transport algorithms only, not '") +
      AllreduceAlgorithmName(algorithm) +
      "': the runtime resolves auto, mpi, shm and hierarchical_shm before calling it");
}

}  // namespace tfdist
