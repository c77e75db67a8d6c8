#include "cc/mpi/mpi_control_plane.h"

#include "cc/mpi/mpi_wait.h"

namespace tfdist {

Status MpiControlPlane::Create(MPI_Comm comm, std::unique_ptr<MpiControlPlane>* out) {
  MPI_Comm duplicate;
  int rc = MPI_Comm_dup(comm, &duplicate);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup for the control plane");
  *out = std::make_unique<MpiControlPlane>(duplicate);
  return Status::OK();
}

MpiControlPlane::MpiControlPlane(MPI_Comm duplicate) : comm_(duplicate) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiControlPlane::~MpiControlPlane() {
  if (!closed()) MPI_Comm_free(&comm_);
}

bool MpiControlPlane::closed() const {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

Status MpiControlPlane::AndAllreduce(uint64_t* words, size_t count, WaitKind wait) {
  MPI_Request request;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(count), MPI_UINT64_T,
                          MPI_BAND, comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "negotiation allreduce");
  return WaitAllPolitely(1, &request, "negotiation allreduce", wait);
}

Status MpiControlPlane::Allgatherv(const std::vector<uint8_t>& mine, WaitKind wait,
                                   std::vector<std::vector<uint8_t>>* per_rank) {
  int my_size = static_cast<int>(mine.size());
  std::vector<int> sizes(size_);
  MPI_Request request;
  int rc = MPI_Iallgather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "negotiation allgather");
  TFDIST_RETURN_IF_ERROR(WaitAllPolitely(1, &request, "negotiation allgather", wait));

  std::vector<int> offsets(size_, 0);
  for (int r = 1; r < size_; ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  std::vector<uint8_t> all(offsets[size_ - 1] + sizes[size_ - 1]);
  rc = MPI_Iallgatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(),
                       offsets.data(), MPI_BYTE, comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "negotiation allgatherv");
  TFDIST_RETURN_IF_ERROR(WaitAllPolitely(1, &request, "negotiation allgatherv", wait));

  per_rank->assign(size_, {});
  for (int r = 0; r < size_; ++r) {
    (*per_rank)[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + sizes[r]);
  }
  return Status::OK();
}

Status MpiControlPlane::Barrier(WaitKind wait) {
  MPI_Request request;
  int rc = MPI_Ibarrier(comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ibarrier");
  return WaitAllPolitely(1, &request, "MPI_Ibarrier", wait);
}

void MpiControlPlane::Abort(const std::string&) { MPI_Abort(comm_, 1); }

}  // namespace tfdist
