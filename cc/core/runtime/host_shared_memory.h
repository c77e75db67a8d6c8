// Each host's own shared segment, on which the "hierarchical_shm" algorithm
// runs hierarchical allreduce's phases within a host (hierarchical_allreduce.h,
// HierarchicalAllreduceOverSharedMemory) when a job spans several hosts
// (real ones, or TFDIST_VIRTUAL_HOSTS on one machine): the ranks of a host
// map a segment of their own, and the flat "shm" algorithm, which needs
// every rank on one segment, stays off.
#ifndef TFDIST_CORE_RUNTIME_HOST_SHARED_MEMORY_H_
#define TFDIST_CORE_RUNTIME_HOST_SHARED_MEMORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "cc/core/base/status.h"
#include "cc/core/collectives/shared_memory_allreduce.h"
#include "cc/core/control/control_plane.h"
#include "cc/core/control/shared_segment.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// A segment the ranks of one host share, and the allreduce over it: the
// whole job's ("shm", where every rank is on one machine) or one host's
// among several ("hierarchical_shm"). Empty where there is none. The
// allreduce points into the segment, so it goes first.
struct HostSharedMemory {
  std::unique_ptr<SharedSegment> segment;
  std::unique_ptr<SharedMemoryAllreduce> allreduce;  // over the segment's ranks
};

// Collective over `agree`, whose ranks include `group`'s: the ranks of
// `group` (all on this machine) map a segment of two `slot_bytes` slots a
// rank, and check that each sees the others' processes; then every rank of
// `agree` keeps its segment only where all of them could, since a group
// must not run on shared memory where another runs on messages. *out holds
// the segment and its allreduce, or nothing with the reason in *why_not
// (a phrase after "because"). Fails only where a control plane does.
Status MapSharedMemory(ControlPlane& group, ControlPlane& agree, size_t slot_bytes,
                       bool oversubscribed, HostSharedMemory* out, std::string* why_not);

// Each rank's two slots on its host's segment. Each chunk's part crosses
// hosts as one allreduce and pays the link's latency once, so the chunks are
// larger than the flat algorithm's 256 KiB; the planner's segment count
// usually cuts them smaller still (hierarchical_allreduce.h).
constexpr size_t kHostSharedMemorySlotBytes = size_t{1} << 20;
// "auto" times hierarchical_shm from a multiple of it up (executor.h), a
// size class's lower end only where it is a power of two.
static_assert((kHostSharedMemorySlotBytes & (kHostSharedMemorySlotBytes - 1)) == 0,
              "a size class must lie wholly on one side of where auto times it");

// Collective over `world` (every rank of `hosts`): where the job has more
// than one host, the same number of ranks on each, more than one rank a
// host, and each host's ranks on one machine (`machines`), the ranks of
// each host map a segment among themselves, talking over `transport` (the
// ranks' own messages: not an emulated link); then all agree. *out holds
// this rank's host's segment and allreduce where every host has one, and
// nothing otherwise, with the reason in *why_not (a phrase after
// "because"): MapSharedMemory with a host's ranks as the group and `world`
// to agree. Fails only where a control plane does.
Status MapHostSharedMemory(Transport& transport, ControlPlane& world, const HostLayout& hosts,
                           const HostLayout& machines, bool oversubscribed,
                           HostSharedMemory* out, std::string* why_not);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_HOST_SHARED_MEMORY_H_
