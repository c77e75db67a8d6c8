#include "cc/core/runtime/fusion.h"

#include "cc/core/numeric/convert.h"

namespace tfdist {

namespace {

bool CanShare(const TensorDescription& a, const TensorDescription& b) {
  bool same = true;
  ForEachDescriptionField([&](auto field, const DescriptionField& role) {
    if (role.fusion_key) same = same && a.*field == b.*field;
  });
  return same;
}

}  // namespace

size_t AccumulationBytes(const TensorDescription& description) {
  return static_cast<size_t>(description.num_elements()) *
         DataTypeSize(WireType(description));
}

std::vector<std::vector<size_t>> PlanFusion(
    const std::vector<const TensorDescription*>& descriptions,
    size_t threshold_bytes) {
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> group_bytes;
  std::vector<bool> fusible;  // per group: may take more tensors
  for (size_t i = 0; i < descriptions.size(); ++i) {
    const TensorDescription& d = *descriptions[i];
    const size_t bytes = AccumulationBytes(d);
    const bool can_fuse = d.type == CollectiveType::kAllreduce && bytes <= threshold_bytes;
    bool placed = false;
    if (can_fuse) {
      for (size_t g = 0; g < groups.size() && !placed; ++g) {
        const TensorDescription& first = *descriptions[groups[g][0]];
        if (fusible[g] && CanShare(first, d) && group_bytes[g] + bytes <= threshold_bytes) {
          groups[g].push_back(i);
          group_bytes[g] += bytes;
          placed = true;
        }
      }
    }
    if (!placed) {
      groups.push_back({i});
      group_bytes.push_back(bytes);
      fusible.push_back(can_fuse);
    }
  }
  return groups;
}

}  // namespace tfdist
