#include "cc/core/runtime/topology.h"

#include <string>

#include "cc/core/transport/mpi_comm.h"
#include "cc/core/transport/mpi_error.h"

namespace tfdist {
namespace {

// Each rank's host, labelled by the lowest rank on it (shared memory is
// what MPI knows a host by). `comm` is tfdist's own (mpi_comm.h).
Status RealHostLabels(MPI_Comm comm, int rank, int size, std::vector<int>* labels) {
  constexpr const char* kDuring = "finding which ranks share a host";
  OwnedComm local;
  TFDIST_RETURN_IF_ERROR(SplitByMachine(comm, rank, kDuring, &local));
  int label = rank;
  int rc = MPI_Allreduce(MPI_IN_PLACE, &label, 1, MPI_INT, MPI_MIN, local.get());
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce", kDuring, local.get());
  labels->assign(size, 0);
  rc = MPI_Allgather(&label, 1, MPI_INT, labels->data(), 1, MPI_INT, comm);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allgather", kDuring, comm);
  return Status::OK();
}

}  // namespace

Status DiscoverTopology(MPI_Comm user_comm, int virtual_hosts, Topology* out) {
  // On a duplicate: the user's communicator keeps its error handler, and
  // tfdist's calls return errors.
  OwnedComm comm;
  TFDIST_RETURN_IF_ERROR(DuplicateComm(user_comm, "finding the hosts", &comm));
  Topology t;
  int rc = MPI_Comm_rank(comm.get(), &t.rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm.get(), &t.size);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_rank/size", "finding the hosts");
  if (virtual_hosts > 0) {
    if (t.size % virtual_hosts != 0) {
      return Status::InvalidArgument(
          "TFDIST_VIRTUAL_HOSTS=" + std::to_string(virtual_hosts) + " does not divide the " +
          std::to_string(t.size) + " ranks of this job into equal hosts");
    }
    t.hosts = HostLayout::Consecutive(t.size, virtual_hosts);
  } else {
    std::vector<int> labels;
    TFDIST_RETURN_IF_ERROR(RealHostLabels(comm.get(), t.rank, t.size, &labels));
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
