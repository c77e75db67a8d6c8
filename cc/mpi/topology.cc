#include "cc/mpi/topology.h"

#include <string>

#include "cc/mpi/mpi_wait.h"

namespace tfdist {
namespace {

// Each rank's host, labelled by the lowest rank on it (shared memory is
// what MPI knows a host by).
Status RealHostLabels(MPI_Comm comm, int rank, int size, std::vector<int>* labels) {
  MPI_Comm local;
  int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split_type");
  int label = rank;
  rc = MPI_Allreduce(MPI_IN_PLACE, &label, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce of the host label");
  labels->assign(size, 0);
  rc = MPI_Allgather(&label, 1, MPI_INT, labels->data(), 1, MPI_INT, comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allgather of the host labels");
  return Status::OK();
}

}  // namespace

Status DiscoverTopology(MPI_Comm comm, int virtual_hosts, Topology* out) {
  Topology t;
  MPI_Comm_rank(comm, &t.rank);
  MPI_Comm_size(comm, &t.size);
  if (virtual_hosts > 0) {
    if (t.size % virtual_hosts != 0) {
      return Status::InvalidArgument(
          "TFDIST_VIRTUAL_HOSTS=" + std::to_string(virtual_hosts) + " does not divide the " +
          std::to_string(t.size) + " ranks of this job into equal hosts");
    }
    t.hosts = HostLayout::Consecutive(t.size, virtual_hosts);
  } else {
    std::vector<int> labels;
    TFDIST_RETURN_IF_ERROR(RealHostLabels(comm, t.rank, t.size, &labels));
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
  *out = t;
  return Status::OK();
}

}  // namespace tfdist
