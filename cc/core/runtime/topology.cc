#include "cc/core/runtime/topology.h"

#include <cstdint>

namespace tfdist {

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
