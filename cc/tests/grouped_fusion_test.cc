// PlanFusion for the members of grouped allgathers and reducescatters, and
// Adasum allreduces, which fuse only among themselves.
#include <vector>

#include "cc/core/runtime/fusion.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

TensorDescription Member(CollectiveType type, DataType dtype, int64_t rows, int group_size) {
  TensorDescription d;
  d.type = type;
  d.dtype = dtype;
  d.shape = {rows, 3};
  d.group_size = group_size;
  return d;
}

std::vector<std::vector<size_t>> Plan(const std::vector<TensorDescription>& tensors,
                                      size_t threshold) {
  std::vector<const TensorDescription*> pointers;
  for (const TensorDescription& d : tensors) pointers.push_back(&d);
  return PlanFusion(pointers, threshold);
}

using Groups = std::vector<std::vector<size_t>>;
constexpr auto kGather = CollectiveType::kAllgather;
constexpr auto kScatter = CollectiveType::kReducescatter;

TFDIST_TEST(GroupedAllgathersFuseWhateverTheirDtypesAndSizes) {
  const std::vector<TensorDescription> tensors = {
      Member(kGather, DataType::kFloat32, 1 << 20, 3), Member(kGather, DataType::kInt32, 1, 3),
      Member(kGather, DataType::kBool, 0, 3), Member(kGather, DataType::kFloat32, 2, 0)};
  // The ungrouped allgather (group_size 0) stays alone.
  CHECK(Plan(tensors, 1024) == (Groups{{0, 1, 2}, {3}}));
  CHECK(Plan(tensors, 0) == (Groups{{0}, {1}, {2}, {3}}));
}

TFDIST_TEST(GroupedReducescattersFuseWhenTheyReduceAlike) {
  std::vector<TensorDescription> tensors = {
      Member(kScatter, DataType::kFloat32, 5, 4), Member(kScatter, DataType::kFloat64, 5, 4),
      Member(kScatter, DataType::kFloat32, 7, 4), Member(kScatter, DataType::kFloat32, 1, 4),
      Member(kGather, DataType::kFloat32, 1, 1)};
  tensors[3].postscale = 0.5;
  CHECK(Plan(tensors, 1024) == (Groups{{0, 2}, {1}, {3}, {4}}));
}

TFDIST_TEST(AdasumAllreducesFuseOnlyWithAdasum) {
  TensorDescription sum, adasum;
  sum.shape = adasum.shape = {4};
  adasum.combiner = Combiner::kAdasum;
  const std::vector<TensorDescription> tensors = {sum, adasum, sum, adasum};
  CHECK(Plan(tensors, 1 << 20) == (Groups{{0, 2}, {1, 3}}));
}

}  // namespace
}  // namespace tfdist
