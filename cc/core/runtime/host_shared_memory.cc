#include "cc/core/runtime/host_shared_memory.h"

#include <vector>

#include "cc/core/control/transport_control_plane.h"
#include "cc/core/transport/subgroup_transport.h"

namespace tfdist {
namespace {

// Why the layout leaves nothing to share within a host; empty where it does.
// Every rank sees the same layouts, so every rank gives the same answer.
std::string WhyNoHostSegments(const HostLayout& hosts, const HostLayout& machines) {
  if (hosts.host_count() < 2) return "the job has one host";
  if (!hosts.uniform()) return "the hosts have different numbers of ranks";
  if (hosts.ranks_per_host() < 2) return "every host has one rank";
  for (int host = 0; host < hosts.host_count(); ++host) {
    const std::vector<int>& ranks = hosts.ranks_of_host(host);
    for (int rank : ranks) {
      if (machines.host_of(rank) != machines.host_of(ranks.front())) {
        return "host " + std::to_string(host) + "'s ranks are on more than one machine";
      }
    }
  }
  return "";
}

}  // namespace

Status MapHostSharedMemory(Transport& transport, ControlPlane& world, const HostLayout& hosts,
                           const HostLayout& machines, bool oversubscribed,
                           HostSharedMemory* out, std::string* why_not) {
  *out = HostSharedMemory{};
  *why_not = WhyNoHostSegments(hosts, machines);
  if (!why_not->empty()) return Status::OK();
  const int rank = world.rank();
  SubgroupTransport host_transport(transport, hosts.ranks_of_host(hosts.host_of(rank)));
  TransportControlPlane host_plane(host_transport);
  HostSharedMemory mine;
  std::string why;
  TFDIST_RETURN_IF_ERROR(SharedSegment::Create(
      host_plane, SharedMemoryAllreduce::RegionBytes(kHostSharedMemorySlotBytes), &mine.segment,
      &why));
  if (mine.segment != nullptr) {
    mine.allreduce = std::make_unique<SharedMemoryAllreduce>(
        host_plane.rank(), mine.segment->regions(), kHostSharedMemorySlotBytes, oversubscribed);
    // Once every rank of the host has written its process id, all must see all.
    TFDIST_RETURN_IF_ERROR(host_plane.Barrier(WaitKind::kIdle));
    if (!mine.allreduce->PeersVisible()) {
      why = "some rank cannot see another's process (separate PID namespaces), which a "
            "wait on shared memory needs to tell a dead peer from a slow one";
    }
  }
  // Every host or none: the chunks that cross hosts must match.
  uint64_t ready = why.empty() ? 1 : 0;
  TFDIST_RETURN_IF_ERROR(world.AndAllreduce(&ready, 1, WaitKind::kIdle));
  if (ready == 0) {
    *why_not = why.empty() ? "another host could not map a segment" : why;
    return Status::OK();
  }
  *out = std::move(mine);
  return Status::OK();
}

}  // namespace tfdist
