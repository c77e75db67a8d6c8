// MapHostSharedMemory and MapSharedMemory over threads as ranks (each maps its host's object
// itself, as a process would): a segment per host where every host has two
// ranks or more on one machine, on which hierarchical_shm then reduces
// correctly; and none, with the same reason on every rank, where the layout
// leaves nothing to share within a host.
#include <string>
#include <vector>

#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/control/transport_control_plane.h"
#include "cc/core/runtime/host_shared_memory.h"
#include "cc/core/transport/subgroup_transport.h"
#include "cc/core/tuning/hierarchical_planner.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::HostLayout;
using tfdist::HostSharedMemory;
using tfdist::ReduceOp;
using tfdist::RunOnThreads;
using tfdist::Status;
using tfdist::Transport;
using tfdist::TransportControlPlane;

const tfdist::NetworkCost kNetwork =
    tfdist::LinearNetwork({1e-6, 1e-10, 1e-10}, {1e-5, 1e-9, 1e-10});

// Each rank's outcome of MapHostSharedMemory on `hosts` over one machine
// layout `machines`, and, where it mapped one, of a hierarchical_shm call.
struct Outcome {
  Status status;
  bool mapped = false;
  int segment_rank = -1;
  int segment_size = 0;
  std::string why_not;
  std::vector<float> result;
};

std::vector<Outcome> MapOnThreads(const HostLayout& hosts, const HostLayout& machines) {
  std::vector<Outcome> outcomes(hosts.size());
  const std::vector<Status> statuses = RunOnThreads(hosts.size(), [&](Transport& transport) {
    Outcome& out = outcomes[transport.rank()];
    TransportControlPlane world(transport);
    HostSharedMemory memory;
    TFDIST_RETURN_IF_ERROR(tfdist::MapHostSharedMemory(transport, world, hosts, machines,
                                                       /*oversubscribed=*/true, &memory,
                                                       &out.why_not));
    out.mapped = memory.allreduce != nullptr;
    if (!out.mapped) return Status::OK();
    out.segment_rank = memory.allreduce->rank();
    out.segment_size = memory.allreduce->size();
    // Rank r contributes r + 1 everywhere: every element sums to P(P+1)/2.
    out.result.assign(300'001, static_cast<float>(transport.rank() + 1));
    return tfdist::HierarchicalAllreduceOverSharedMemory(
        *memory.allreduce, transport, hosts, tfdist::CostModelPlanner(kNetwork),
        out.result.data(), out.result.data(), out.result.size(), DataType::kFloat32,
        ReduceOp::kSum, 1.0);
  });
  for (size_t rank = 0; rank < statuses.size(); ++rank) outcomes[rank].status = statuses[rank];
  return outcomes;
}

}  // namespace

TFDIST_TEST(HostSharedMemoryMapsOneSegmentPerHost) {
  for (const HostLayout& hosts : {HostLayout::Consecutive(4, 2), HostLayout::Consecutive(6, 2),
                                  HostLayout::FromHostLabels({0, 1, 0, 1})}) {
    const int p = hosts.size();
    const std::vector<Outcome> outcomes = MapOnThreads(hosts, HostLayout(p));
    for (int rank = 0; rank < p; ++rank) {
      const Outcome& out = outcomes[rank];
      CHECK_EQ_MSG(DescribeStatus(out.status), std::string("OK"), "rank " << rank);
      CHECK_EQ_MSG(out.mapped, true, "rank " << rank << ": " << out.why_not);
      CHECK_EQ(out.segment_size, hosts.ranks_per_host());
      CHECK_EQ(out.segment_rank, hosts.local_rank(rank));
      const float expected = static_cast<float>(p * (p + 1) / 2);
      size_t wrong = 0;
      for (float value : out.result) wrong += value != expected;
      CHECK_EQ_MSG(wrong, size_t{0}, "rank " << rank << " of " << p);
    }
  }
}

TFDIST_TEST(HostSharedMemoryNamesWhyNotOnEveryRank) {
  struct Case {
    HostLayout hosts;
    HostLayout machines;
    std::string why;
  };
  const std::vector<Case> cases = {
      {HostLayout(4), HostLayout(4), "the job has one host"},
      {HostLayout::Consecutive(3, 3), HostLayout(3), "every host has one rank"},
      {HostLayout::FromHostLabels({0, 0, 1}), HostLayout(3), "different numbers of ranks"},
      {HostLayout::Consecutive(4, 2), HostLayout::FromHostLabels({0, 1, 0, 1}),
       "on more than one machine"},
  };
  for (const Case& c : cases) {
    const std::vector<Outcome> outcomes = MapOnThreads(c.hosts, c.machines);
    for (size_t rank = 0; rank < outcomes.size(); ++rank) {
      const Outcome& out = outcomes[rank];
      CHECK_EQ_MSG(DescribeStatus(out.status), std::string("OK"), c.why << " rank " << rank);
      CHECK_EQ_MSG(out.mapped, false, c.why << " rank " << rank);
      CHECK_MSG(out.why_not.find(c.why) != std::string::npos,
                "rank " << rank << " gave '" << out.why_not << "', not '" << c.why << "'");
    }
  }
}

// MapSharedMemory where one host's ranks cannot map a segment (two slots of
// 1 TiB: /dev/shm cannot reserve them) and the other's can: no rank keeps
// one, the first host names its own failure and the second says another host
// failed; and over one group that is the whole job, as "shm" maps it, every
// rank keeps the segment.
TFDIST_TEST(SharedMemoryIsEveryHostsOrNone) {
  const HostLayout hosts = HostLayout::Consecutive(4, 2);
  std::vector<std::string> why(4);
  std::vector<int> mapped(4, 0);  // not vector<bool>: ranks write it at once
  std::vector<Status> statuses = RunOnThreads(4, [&](Transport& transport) {
    const int rank = transport.rank();
    TransportControlPlane world(transport);
    tfdist::SubgroupTransport host_transport(transport,
                                             hosts.ranks_of_host(hosts.host_of(rank)));
    TransportControlPlane host(host_transport);
    const size_t slot_bytes = hosts.host_of(rank) == 0 ? size_t{1} << 40 : size_t{1} << 20;
    HostSharedMemory memory;
    TFDIST_RETURN_IF_ERROR(tfdist::MapSharedMemory(host, world, slot_bytes,
                                                   /*oversubscribed=*/true, &memory,
                                                   &why[rank]));
    mapped[rank] = memory.allreduce != nullptr || memory.segment != nullptr;
    return Status::OK();
  });
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), "rank " << rank);
    CHECK_EQ_MSG(mapped[rank], 0, "rank " << rank);
    const std::string expected =
        hosts.host_of(rank) == 0 ? "posix_fallocate" : "another host could not map a segment";
    CHECK_MSG(why[rank].find(expected) != std::string::npos,
              "rank " << rank << " gave '" << why[rank] << "', not '" << expected << "'");
  }

  std::vector<int> segment_size(3, 0);
  statuses = RunOnThreads(3, [&](Transport& transport) {
    TransportControlPlane world(transport);
    HostSharedMemory memory;
    std::string why_not;
    TFDIST_RETURN_IF_ERROR(tfdist::MapSharedMemory(world, world, 256u << 10,
                                                   /*oversubscribed=*/true, &memory, &why_not));
    if (memory.allreduce == nullptr) return Status::Internal("not mapped: " + why_not);
    segment_size[transport.rank()] = memory.allreduce->size();
    return Status::OK();
  });
  for (int rank = 0; rank < 3; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), "rank " << rank);
    CHECK_EQ(segment_size[rank], 3);
  }
}

}  // namespace tfdist_test
