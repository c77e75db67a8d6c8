// tfdist's own communicators: duplicates of the user's, with errors returned.
//
// Every MPI call tfdist makes goes to a communicator made here (or split
// from one), never to the user's: its messages cannot match the user's, and
// its error handler is MPI_ERRORS_RETURN whatever the user's is, so that a
// failed call (a dead peer under ULFM included) becomes a Status naming it
// (mpi_error.h) instead of aborting the job. MPI_Comm_dup copies the error
// handler, so the user's communicator keeps its own.
#ifndef TFDIST_MPI_MPI_COMM_H_
#define TFDIST_MPI_MPI_COMM_H_

#include <mpi.h>

#include "cc/core/base/status.h"

namespace tfdist {

// A communicator owned by tfdist; freed on destruction unless MPI has been
// finalized. Move-only.
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(MPI_Comm comm);
  ~OwnedComm() { Free(); }
  OwnedComm(OwnedComm&& other) noexcept;
  OwnedComm& operator=(OwnedComm&& other) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;

  MPI_Comm get() const { return comm_; }
  MPI_Comm release();

 private:
  void Free();
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Revokes every live OwnedComm of this process not yet revoked (ULFM
// MPIX_Comm_revoke; nothing where the MPI lacks it). Called when an MPI call
// reports a failed peer or a revoked communicator (mpi_error.h), so that
// every runtime of this process, and through the revoke every peer's,
// stops promptly. Returns how many it revoked now.
int RevokeOwnedComms();

// Duplicates `comm` and sets MPI_ERRORS_RETURN on the duplicate; `purpose`
// names it in an error.
Status DuplicateComm(MPI_Comm comm, const char* purpose, OwnedComm* out);

}  // namespace tfdist

#endif  // TFDIST_MPI_MPI_COMM_H_
