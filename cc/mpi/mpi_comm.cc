#include "cc/mpi/mpi_comm.h"

#include <string>
#include <utility>

#include "cc/mpi/mpi_error.h"

namespace tfdist {

namespace {

// A communicator created from another may carry its parent's handler;
// tfdist's own must return errors.
Status ReturnErrors(OwnedComm comm, const char* purpose, OwnedComm* out) {
  const int rc = MPI_Comm_set_errhandler(comm.get(), MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_set_errhandler", purpose);
  *out = std::move(comm);
  return Status::OK();
}

}  // namespace

OwnedComm& OwnedComm::operator=(OwnedComm&& other) noexcept {
  if (this != &other) {
    Free();
    comm_ = other.release();
  }
  return *this;
}

MPI_Comm OwnedComm::release() { return std::exchange(comm_, MPI_COMM_NULL); }

void OwnedComm::Free() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize nothing may be freed; the process is ending.
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

Status DuplicateComm(MPI_Comm comm, const char* purpose, OwnedComm* out) {
  MPI_Comm duplicate = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(comm, &duplicate);
  if (rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Comm_dup", std::string("duplicating the communicator for ") +
                                            purpose);
  }
  return ReturnErrors(OwnedComm(duplicate), purpose, out);
}

}  // namespace tfdist
