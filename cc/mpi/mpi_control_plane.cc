#include "cc/mpi/mpi_control_plane.h"

#include <utility>

#include "cc/mpi/mpi_error.h"
#include "cc/mpi/mpi_wait.h"

namespace tfdist {

Status MpiControlPlane::Create(MPI_Comm comm, std::unique_ptr<MpiControlPlane>* out) {
  OwnedComm duplicate;
  TFDIST_RETURN_IF_ERROR(DuplicateComm(comm, "the control plane", &duplicate));
  int rank = 0;
  int size = 1;
  int rc = MPI_Comm_rank(duplicate.get(), &rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(duplicate.get(), &size);
  if (rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Comm_rank/size", "starting the control plane", duplicate.get());
  }
  *out = std::make_unique<MpiControlPlane>(std::move(duplicate), rank, size);
  return Status::OK();
}

MpiControlPlane::MpiControlPlane(OwnedComm comm, int rank, int size)
    : comm_(std::move(comm)), rank_(rank), size_(size) {}

bool MpiControlPlane::closed() const {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

Status MpiControlPlane::AndAllreduce(uint64_t* words, size_t count, WaitKind wait) {
  constexpr const char* kDuring = "the negotiation round's allreduce (the control plane)";
  MPI_Request request;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(count), MPI_UINT64_T,
                          MPI_BAND, comm_.get(), &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallreduce", kDuring, comm_.get());
  return WaitAllPolitely(comm_.get(), 1, &request, kDuring, wait, oversubscribed_);
}

Status MpiControlPlane::Allgatherv(const std::vector<uint8_t>& mine, WaitKind wait,
                                   std::vector<std::vector<uint8_t>>* per_rank) {
  constexpr const char* kDuring = "the negotiation round's allgather (the control plane)";
  int my_size = static_cast<int>(mine.size());
  std::vector<int> sizes(size_);
  MPI_Request request;
  int rc = MPI_Iallgather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_.get(),
                          &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallgather", kDuring, comm_.get());
  TFDIST_RETURN_IF_ERROR(
      WaitAllPolitely(comm_.get(), 1, &request, kDuring, wait, oversubscribed_));

  std::vector<int> offsets(size_, 0);
  for (int r = 1; r < size_; ++r) offsets[r] = offsets[r - 1] + sizes[r - 1];
  std::vector<uint8_t> all(offsets[size_ - 1] + sizes[size_ - 1]);
  rc = MPI_Iallgatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(),
                       offsets.data(), MPI_BYTE, comm_.get(), &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Iallgatherv", kDuring, comm_.get());
  TFDIST_RETURN_IF_ERROR(
      WaitAllPolitely(comm_.get(), 1, &request, kDuring, wait, oversubscribed_));

  per_rank->assign(size_, {});
  for (int r = 0; r < size_; ++r) {
    (*per_rank)[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + sizes[r]);
  }
  return Status::OK();
}

Status MpiControlPlane::Barrier(WaitKind wait) {
  constexpr const char* kDuring = "a barrier (the control plane)";
  MPI_Request request;
  int rc = MPI_Ibarrier(comm_.get(), &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ibarrier", kDuring, comm_.get());
  return WaitAllPolitely(comm_.get(), 1, &request, kDuring, wait, oversubscribed_);
}

void MpiControlPlane::Abort(const std::string&) { MPI_Abort(comm_.get(), 1); }

}  // namespace tfdist
