#include "cc/core/runtime/fusion.h"

#include "cc/core/numeric/convert.h"

namespace tfdist {

namespace {

bool CanShare(const TensorDescription& a, const TensorDescription& b) {
  if (a.type != b.type) return false;
  // An allgather moves bytes: any dtypes share one.
  if (a.type == CollectiveType::kAllgather) return true;
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
    // Members of grouped allgathers and reducescatters fuse whatever their
    // size (an allgather's differs between ranks, so no size could be
    // compared alike on every rank).
    const bool grouped = d.group_size > 0 && (d.type == CollectiveType::kAllgather ||
                                              d.type == CollectiveType::kReducescatter);
    const bool can_fuse = grouped ? threshold_bytes > 0
                                  : d.type == CollectiveType::kAllreduce &&
                                        bytes <= threshold_bytes;
    bool placed = false;
    if (can_fuse) {
      for (size_t g = 0; g < groups.size() && !placed; ++g) {
        const TensorDescription& first = *descriptions[groups[g][0]];
        if (fusible[g] && CanShare(first, d) &&
            (grouped || group_bytes[g] + bytes <= threshold_bytes)) {
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
