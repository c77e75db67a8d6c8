// Which host each rank of a group runs on. The hierarchical allreduce and the
// two-link cost model need it; flat algorithms do not.
//
// A host's ranks, in rank order, are its local group (local rank = position
// in it). Hosts are numbered by their first rank. The layout is uniform when
// every host has the same number of ranks; then the ranks with local rank l,
// one per host in host order, form cross group l.
#ifndef TFDIST_CORE_TRANSPORT_HOST_LAYOUT_H_
#define TFDIST_CORE_TRANSPORT_HOST_LAYOUT_H_

#include <vector>

namespace tfdist {

class HostLayout {
 public:
  // Every rank on one host.
  explicit HostLayout(int size = 1);
  // `host_of_rank[r]` is any label of rank r's host; ranks with equal labels
  // share a host. Labels are renumbered by first appearance.
  static HostLayout FromHostLabels(const std::vector<int>& host_of_rank);
  // `hosts` hosts of size/hosts consecutive ranks each; requires
  // size % hosts == 0 (the caller checks and reports).
  static HostLayout Consecutive(int size, int hosts);

  int size() const { return static_cast<int>(host_of_rank_.size()); }
  int host_count() const { return static_cast<int>(ranks_of_host_.size()); }
  int host_of(int rank) const { return host_of_rank_[rank]; }
  bool same_host(int a, int b) const { return host_of_rank_[a] == host_of_rank_[b]; }
  const std::vector<int>& host_of_rank() const { return host_of_rank_; }
  // The ranks of `host`, ascending.
  const std::vector<int>& ranks_of_host(int host) const { return ranks_of_host_[host]; }
  int local_rank(int rank) const { return local_rank_[rank]; }
  int local_size(int rank) const {
    return static_cast<int>(ranks_of_host_[host_of_rank_[rank]].size());
  }
  // Every host has the same number of ranks.
  bool uniform() const;
  // Uniform layouts only: ranks per host.
  int ranks_per_host() const { return size() / host_count(); }
  // Uniform layouts only: the ranks with local rank `local_rank`, in host order.
  std::vector<int> CrossGroup(int local_rank) const;

 private:
  std::vector<int> host_of_rank_;
  std::vector<std::vector<int>> ranks_of_host_;
  std::vector<int> local_rank_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_HOST_LAYOUT_H_
