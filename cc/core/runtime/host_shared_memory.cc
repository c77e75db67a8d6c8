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

Status MapSharedMemory(ControlPlane& group, ControlPlane& agree, size_t slot_bytes,
                       bool oversubscribed, HostSharedMemory* out, std::string* why_not) {
  *out = HostSharedMemory{};
  HostSharedMemory mine;
  std::string why;
  TFDIST_RETURN_IF_ERROR(SharedSegment::Create(
      group, SharedMemoryAllreduce::RegionBytes(slot_bytes), &mine.segment, &why));
  // Two words, so that every rank can tell which of the two failed where.
  enum : size_t { kMapped, kVisible };
  uint64_t ready[2] = {mine.segment != nullptr ? 1u : 0u, 1};
  if (mine.segment != nullptr) {
    mine.allreduce = std::make_unique<SharedMemoryAllreduce>(
        group.rank(), mine.segment->regions(), slot_bytes, oversubscribed);
    // Once every rank of the group has written its process id, all must see all.
    TFDIST_RETURN_IF_ERROR(group.Barrier(WaitKind::kIdle));
    ready[kVisible] = mine.allreduce->PeersVisible() ? 1 : 0;
  }
  TFDIST_RETURN_IF_ERROR(agree.AndAllreduce(ready, 2, WaitKind::kIdle));
  if (ready[kVisible] == 0) {
    *why_not = "some rank cannot see another's process (separate PID namespaces), which a "
               "wait on shared memory needs to tell a dead peer from a slow one";
  } else if (ready[kMapped] == 0) {
    // SharedSegment::Create gives every rank of a group the same reason.
    *why_not = mine.segment == nullptr ? why : "another host could not map a segment";
  } else {
    *out = std::move(mine);
  }
  return Status::OK();
}

Status MapHostSharedMemory(Transport& transport, ControlPlane& world, const HostLayout& hosts,
                           const HostLayout& machines, bool oversubscribed,
                           HostSharedMemory* out, std::string* why_not) {
  *out = HostSharedMemory{};
  *why_not = WhyNoHostSegments(hosts, machines);
  if (!why_not->empty()) return Status::OK();
  SubgroupTransport host_transport(transport, hosts.ranks_of_host(hosts.host_of(world.rank())));
  TransportControlPlane host_plane(host_transport);
  return MapSharedMemory(host_plane, world, kHostSharedMemorySlotBytes, oversubscribed, out,
                         why_not);
}

}  // namespace tfdist
