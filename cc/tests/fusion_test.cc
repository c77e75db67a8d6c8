// PlanFusion: which ready allreduces share a fusion buffer.
#include <vector>

#include "cc/core/runtime/fusion.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

TensorDescription Float32Allreduce(int64_t elements) {
  TensorDescription d;
  d.shape = {elements};
  return d;
}

std::vector<std::vector<size_t>> Plan(const std::vector<TensorDescription>& tensors,
                                      size_t threshold) {
  std::vector<const TensorDescription*> pointers;
  for (const TensorDescription& d : tensors) pointers.push_back(&d);
  return PlanFusion(pointers, threshold);
}

using Groups = std::vector<std::vector<size_t>>;

TFDIST_TEST(FusionPacksSmallTensorsUpToTheThreshold) {
  const std::vector<TensorDescription> tensors(5, Float32Allreduce(256));  // 1 KiB each
  CHECK(Plan(tensors, 64 << 20) == (Groups{{0, 1, 2, 3, 4}}));
  CHECK(Plan(tensors, 2048) == (Groups{{0, 1}, {2, 3}, {4}}));
  CHECK(Plan(tensors, 0) == (Groups{{0}, {1}, {2}, {3}, {4}}));
}

TFDIST_TEST(FusionGroupsLargeTensorsWithSmallOnesUpToTheThreshold) {
  const int64_t largest = kLargestFusedTensorBytes / 4;
  const std::vector<TensorDescription> tensors = {
      Float32Allreduce(largest + 1), Float32Allreduce(10), Float32Allreduce(largest),
      Float32Allreduce(3)};
  // Large tensors share a collective too (the executor does not copy them).
  CHECK(Plan(tensors, 64 << 20) == (Groups{{0, 1, 2, 3}}));
  // The threshold still bounds a group's bytes, large tensors included.
  const size_t two_large = 2 * kLargestFusedTensorBytes + 4;
  CHECK(Plan(tensors, two_large) == (Groups{{0, 1, 3}, {2}}));
  // A small threshold: a tensor over it is alone and closed to others too.
  CHECK(Plan(tensors, 1024) == (Groups{{0}, {1, 3}, {2}}));
}

TFDIST_TEST(FusionKeepsDifferentReductionsApart) {
  std::vector<TensorDescription> tensors(4, Float32Allreduce(8));
  tensors[1].op = ReduceOp::kMax;
  tensors[2].postscale = 0.5;
  tensors[3].type = CollectiveType::kBroadcast;
  CHECK(Plan(tensors, 64 << 20) == (Groups{{0}, {1}, {2}, {3}}));
  tensors.push_back(Float32Allreduce(8));
  CHECK(Plan(tensors, 64 << 20) == (Groups{{0, 4}, {1}, {2}, {3}}));
}

}  // namespace
}  // namespace tfdist
