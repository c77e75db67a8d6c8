#include "cc/core/runtime/topology.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace tfdist {

namespace {
// Local and cross ranks of `t.rank` from `t.hosts`.
Status FinishTopology(Topology t, Topology* out);
}  // namespace

Status TopologyFromMachines(int rank, const std::vector<std::string>& machines,
                            int virtual_hosts, Topology* out) {
  Topology t;
  t.rank = rank;
  t.size = static_cast<int>(machines.size());
  t.machines = machines;
  if (virtual_hosts > 0) {
    if (t.size % virtual_hosts != 0) {
      return Status::InvalidArgument(
          "TFDIST_VIRTUAL_HOSTS=" + std::to_string(virtual_hosts) + " does not divide the " +
          std::to_string(t.size) + " ranks of this job into equal hosts");
    }
    t.hosts = HostLayout::Consecutive(t.size, virtual_hosts);
    t.virtual_host_labels = t.hosts.host_of_rank();
  } else {
    // Each rank's host, labelled by the lowest rank on it.
    std::vector<int> labels(t.size, 0);
    for (int r = 0; r < t.size; ++r) {
      labels[r] = r;
      for (int first = 0; first < r; ++first) {
        if (machines[first] == machines[r]) {
          labels[r] = first;
          break;
        }
      }
    }
    t.hosts = HostLayout::FromHostLabels(labels);
  }
  return FinishTopology(std::move(t), out);
}

Status TopologyFromKeptVirtualHosts(int rank, const std::vector<std::string>& machines,
                                    const std::vector<int>& kept, int virtual_hosts,
                                    Topology* out) {
  const bool any_kept =
      std::any_of(kept.begin(), kept.end(), [](int host) { return host >= 0; });
  if (!any_kept || virtual_hosts <= 0) {
    return TopologyFromMachines(rank, machines, virtual_hosts, out);
  }
  std::vector<int> labels = kept;
  std::vector<int> count(virtual_hosts, 0);
  for (int host : labels) {
    if (host >= 0 && host < virtual_hosts) ++count[host];
  }
  for (int& host : labels) {
    if (host >= 0 && host < virtual_hosts) continue;
    host = static_cast<int>(std::min_element(count.begin(), count.end()) - count.begin());
    ++count[host];
  }
  Topology t;
  t.rank = rank;
  t.size = static_cast<int>(machines.size());
  t.machines = machines;
  t.hosts = HostLayout::FromHostLabels(labels);
  t.virtual_host_labels = labels;
  return FinishTopology(std::move(t), out);
}

namespace {
Status FinishTopology(Topology t, Topology* out) {
  t.local_rank = t.hosts.local_rank(t.rank);
  t.local_size = t.hosts.local_size(t.rank);
  // Processes with the same local rank, one per host, form the cross group.
  t.cross_rank = 0;
  t.cross_size = 0;
  for (int host = 0; host < t.hosts.host_count(); ++host) {
    const std::vector<int>& ranks = t.hosts.ranks_of_host(host);
    if (static_cast<int>(ranks.size()) <= t.local_rank) continue;
    if (host < t.hosts.host_of(t.rank)) ++t.cross_rank;
    ++t.cross_size;
  }
  *out = std::move(t);
  return Status::OK();
}
}  // namespace

Status DiscoverTopology(ControlPlane& control, const std::string& machine, int virtual_hosts,
                        Topology* out) {
  std::vector<std::vector<uint8_t>> per_rank;
  TFDIST_RETURN_IF_ERROR(control.Allgatherv(std::vector<uint8_t>(machine.begin(), machine.end()),
                                            WaitKind::kTransfer, &per_rank));
  std::vector<std::string> machines;
  machines.reserve(per_rank.size());
  for (const std::vector<uint8_t>& bytes : per_rank) machines.emplace_back(bytes.begin(), bytes.end());
  return TopologyFromMachines(control.rank(), machines, virtual_hosts, out);
}

}  // namespace tfdist
