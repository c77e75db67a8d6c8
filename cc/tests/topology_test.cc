// Host discovery over the control plane (runtime/topology.h) with threads as
// ranks that report different machines, and the calibration cache's name
// (tuning/calibration.h), which depends on the same machine names: both
// used to need MPI, and so ran only under mpirun.
#include <string>
#include <vector>

#include "cc/core/control/transport_control_plane.h"
#include "cc/core/runtime/topology.h"
#include "cc/core/tuning/calibration.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::Status;
using tfdist::Topology;
using tfdist::Transport;

// Every rank's topology, found over a TransportControlPlane with rank r on
// machines[r].
std::vector<Topology> Discover(const std::vector<std::string>& machines, int virtual_hosts,
                               std::vector<Status>* statuses) {
  const int size = static_cast<int>(machines.size());
  std::vector<Topology> found(size);
  *statuses = tfdist::RunOnThreads(size, [&](Transport& transport) {
    tfdist::TransportControlPlane control(transport);
    return tfdist::DiscoverTopology(control, machines[transport.rank()], virtual_hosts,
                                    &found[transport.rank()]);
  });
  return found;
}

}  // namespace

TFDIST_TEST(TopologyGroupsRanksByMachineName) {
  // Interleaved on purpose: hosts are numbered by their first rank, and a
  // host's ranks keep rank order.
  const std::vector<std::string> machines = {"node-a", "node-b", "node-a", "node-c", "node-b"};
  std::vector<Status> statuses;
  const std::vector<Topology> found = Discover(machines, 0, &statuses);
  const int expected_local_rank[] = {0, 0, 1, 0, 1};
  const int expected_local_size[] = {2, 2, 2, 1, 2};
  // Local rank 0 exists on all 3 hosts; local rank 1 on node-a and node-b.
  const int expected_cross_rank[] = {0, 1, 0, 2, 1};
  const int expected_cross_size[] = {3, 3, 2, 3, 2};
  for (int rank = 0; rank < 5; ++rank) {
    CHECK_EQ_MSG(statuses[rank].ok(), true, statuses[rank].message());
    const Topology& t = found[rank];
    CHECK_EQ(t.rank, rank);
    CHECK_EQ(t.size, 5);
    CHECK_EQ(t.hosts.host_count(), 3);
    CHECK_EQ_MSG(t.local_rank, expected_local_rank[rank], "rank " << rank);
    CHECK_EQ_MSG(t.local_size, expected_local_size[rank], "rank " << rank);
    CHECK_EQ_MSG(t.cross_rank, expected_cross_rank[rank], "rank " << rank);
    CHECK_EQ_MSG(t.cross_size, expected_cross_size[rank], "rank " << rank);
    CHECK(t.machines == machines);
  }
  CHECK(found[0].hosts.same_host(0, 2));
  CHECK(!found[0].hosts.same_host(0, 1));
}

TFDIST_TEST(TopologyVirtualHostsSplitConsecutiveRanks) {
  std::vector<Status> statuses;
  const std::vector<Topology> found = Discover({"m", "m", "m", "m", "m", "m"}, 3, &statuses);
  for (int rank = 0; rank < 6; ++rank) {
    CHECK_EQ_MSG(statuses[rank].ok(), true, statuses[rank].message());
    CHECK_EQ(found[rank].hosts.host_count(), 3);
    CHECK_EQ(found[rank].local_rank, rank % 2);
    CHECK_EQ(found[rank].local_size, 2);
    CHECK_EQ(found[rank].cross_rank, rank / 2);
    CHECK_EQ(found[rank].cross_size, 3);
  }
  // Every rank fails; the first to fail aborts the fabric, so a late rank
  // may see Aborted instead of the reason.
  Discover({"m", "m", "m", "m"}, 3, &statuses);
  int named = 0;
  for (const Status& status : statuses) {
    CHECK(!status.ok());
    if (status.message().find("TFDIST_VIRTUAL_HOSTS=3 does not divide the 4 ranks") !=
        std::string::npos) {
      ++named;
    }
  }
  CHECK(named > 0);
}

TFDIST_TEST(VirtualHostsFollowTheProcessesAcrossAMembershipChange) {
  const std::vector<std::string> two(2, "m"), three(3, "m"), four(4, "m");
  Topology t;
  // 4 ranks on 2 virtual hosts lost host 1 (ranks 2 and 3): the two
  // survivors are one host, not two hosts of one rank.
  CHECK_OK(tfdist::TopologyFromKeptVirtualHosts(1, two, {0, 0}, 2, &t));
  CHECK_EQ(t.hosts.host_count(), 1);
  CHECK_EQ(t.local_size, 2);
  CHECK_EQ(t.cross_size, 1);
  CHECK(t.virtual_host_labels == std::vector<int>({0, 0}));
  // Two replacements join: they fill the lost host.
  CHECK_OK(tfdist::TopologyFromKeptVirtualHosts(3, four, {0, 0, -1, -1}, 2, &t));
  CHECK(t.virtual_host_labels == std::vector<int>({0, 0, 1, 1}));
  CHECK_EQ(t.local_rank, 1);
  CHECK_EQ(t.cross_rank, 1);
  // One rank of host 0 lost: 3 ranks on 2 hosts of different sizes (no
  // "does not divide" error), and a replacement fills host 0 again.
  CHECK_OK(tfdist::TopologyFromKeptVirtualHosts(0, three, {0, 1, 1}, 2, &t));
  CHECK_EQ(t.hosts.host_count(), 2);
  CHECK_EQ(t.local_size, 1);
  CHECK_OK(tfdist::TopologyFromKeptVirtualHosts(3, four, {0, 1, 1, -1}, 2, &t));
  CHECK(t.virtual_host_labels == std::vector<int>({0, 1, 1, 0}));
  // No process has a host yet (the job's start): the consecutive split.
  CHECK_OK(tfdist::TopologyFromKeptVirtualHosts(2, four, {-1, -1, -1, -1}, 2, &t));
  CHECK(t.virtual_host_labels == std::vector<int>({0, 0, 1, 1}));
}

TFDIST_TEST(CalibrationCacheIsNamedAfterRankZerosMachine) {
  const std::vector<std::string> machines = {"alpha", "beta", "alpha", "alpha"};
  Topology t;
  CHECK(tfdist::TopologyFromMachines(0, machines, 0, &t).ok());
  // Three ranks on rank 0's machine, which is also its host.
  CHECK_EQ(tfdist::CalibrationCacheFile("/cache", machines, t.hosts),
           std::string("/cache/linkcost-v5-alpha-beta-3on-machine-3on-host.txt"));
  // Two virtual hosts: still three on the machine, two on rank 0's host.
  CHECK(tfdist::TopologyFromMachines(0, machines, 2, &t).ok());
  CHECK_EQ(tfdist::CalibrationCacheFile("/cache", machines, t.hosts),
           std::string("/cache/linkcost-v5-alpha-beta-3on-machine-2on-host.txt"));
}

}  // namespace tfdist_test
