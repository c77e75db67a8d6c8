// Where this process sits: its rank among the processes on its host (local)
// and the rank of its host among the hosts (cross), as Horovod reports them.
// Hosts are the real machines (ranks that report the same machine name share
// one), or, with TFDIST_VIRTUAL_HOSTS=H, H virtual hosts of P/H consecutive
// ranks each, so that one machine can stand in for several. Found over the
// ControlPlane, so it needs no MPI: cc/mpi/ only supplies the machine name.
#ifndef TFDIST_CORE_RUNTIME_TOPOLOGY_H_
#define TFDIST_CORE_RUNTIME_TOPOLOGY_H_

#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/control/control_plane.h"
#include "cc/core/transport/host_layout.h"

namespace tfdist {

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  HostLayout hosts;                   // every rank's host
  std::vector<std::string> machines;  // every rank's real machine name
  // With TFDIST_VIRTUAL_HOSTS=H: every rank's virtual host, 0..H-1 (kept
  // by its process across membership changes); empty otherwise.
  std::vector<int> virtual_host_labels;
};

// Rank `rank`'s topology from every rank's machine name. `virtual_hosts` 0
// uses the real machines; otherwise it must divide the number of ranks
// (InvalidArgument naming TFDIST_VIRTUAL_HOSTS if not).
Status TopologyFromMachines(int rank, const std::vector<std::string>& machines,
                            int virtual_hosts, Topology* out);

// The same with hosts that follow the processes across a membership change
// (elastic training): `kept[r]` is the virtual host rank r's process had
// in the runtime before (-1: none, a process that joined). When no rank
// has one, the consecutive split of TopologyFromMachines; otherwise every
// process keeps its host, and those that joined fill the hosts with the
// fewest ranks (lowest host first), in rank order. Hosts left empty are
// gone; sizes may then differ (a non-uniform layout).
Status TopologyFromKeptVirtualHosts(int rank, const std::vector<std::string>& machines,
                                    const std::vector<int>& kept, int virtual_hosts,
                                    Topology* out);

// Collective over `control`: gathers every rank's `machine` name, then
// TopologyFromMachines.
Status DiscoverTopology(ControlPlane& control, const std::string& machine, int virtual_hosts,
                        Topology* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_TOPOLOGY_H_
