#include "cc/core/transport/host_layout.h"

#include <cstddef>
#include <map>

namespace tfdist {

HostLayout::HostLayout(int size)
    : host_of_rank_(size > 0 ? size : 1, 0), ranks_of_host_(1), local_rank_(host_of_rank_.size()) {
  for (int rank = 0; rank < this->size(); ++rank) {
    ranks_of_host_[0].push_back(rank);
    local_rank_[rank] = rank;
  }
}

HostLayout HostLayout::FromHostLabels(const std::vector<int>& host_of_rank) {
  HostLayout layout;
  layout.host_of_rank_.clear();
  layout.ranks_of_host_.clear();
  layout.local_rank_.clear();
  std::map<int, int> number_of_label;
  for (size_t rank = 0; rank < host_of_rank.size(); ++rank) {
    auto [it, fresh] =
        number_of_label.emplace(host_of_rank[rank], static_cast<int>(number_of_label.size()));
    if (fresh) layout.ranks_of_host_.emplace_back();
    const int host = it->second;
    layout.host_of_rank_.push_back(host);
    layout.local_rank_.push_back(static_cast<int>(layout.ranks_of_host_[host].size()));
    layout.ranks_of_host_[host].push_back(static_cast<int>(rank));
  }
  return layout;
}

HostLayout HostLayout::Consecutive(int size, int hosts) {
  const int per_host = hosts > 0 && size % hosts == 0 ? size / hosts : size;
  std::vector<int> labels(size);
  for (int rank = 0; rank < size; ++rank) labels[rank] = rank / per_host;
  return FromHostLabels(labels);
}

bool HostLayout::uniform() const {
  for (const std::vector<int>& ranks : ranks_of_host_) {
    if (ranks.size() != ranks_of_host_[0].size()) return false;
  }
  return true;
}

std::vector<int> HostLayout::CrossGroup(int local_rank) const {
  std::vector<int> group;
  for (const std::vector<int>& ranks : ranks_of_host_) group.push_back(ranks[local_rank]);
  return group;
}

}  // namespace tfdist
