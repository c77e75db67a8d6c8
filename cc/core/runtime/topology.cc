#include "cc/core/runtime/topology.h"

#include "cc/core/transport/mpi_wait.h"

namespace tfdist {

Status DiscoverTopology(MPI_Comm comm, Topology* out) {
  Topology t;
  MPI_Comm_rank(comm, &t.rank);
  MPI_Comm_size(comm, &t.size);
  MPI_Comm local;
  int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split_type");
  MPI_Comm_rank(local, &t.local_rank);
  MPI_Comm_size(local, &t.local_size);
  MPI_Comm_free(&local);
  // Processes with the same local rank, one per host, form the cross group.
  MPI_Comm cross;
  rc = MPI_Comm_split(comm, t.local_rank, t.rank, &cross);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split");
  MPI_Comm_rank(cross, &t.cross_rank);
  MPI_Comm_size(cross, &t.cross_size);
  MPI_Comm_free(&cross);
  *out = t;
  return Status::OK();
}

}  // namespace tfdist
