#include "cc/mpi/mpi_comm.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // ULFM's MPIX_Comm_revoke where Open MPI was built with it
#endif

#include "cc/mpi/mpi_error.h"

namespace tfdist {

namespace {

// Every live OwnedComm, and whether it has been revoked. The mutex also
// keeps a revoke from racing with the communicator's MPI_Comm_free.
struct LiveComms {
  std::mutex mutex;
  std::map<MPI_Comm, bool> revoked;
};

LiveComms& Live() {
  static LiveComms* live = new LiveComms();  // never destroyed: used at exit
  return *live;
}

void Register(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  std::lock_guard<std::mutex> lock(Live().mutex);
  Live().revoked.emplace(comm, false);
}

void Unregister(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  std::lock_guard<std::mutex> lock(Live().mutex);
  Live().revoked.erase(comm);
}

// A communicator created from another may carry its parent's handler;
// tfdist's own must return errors.
Status ReturnErrors(OwnedComm comm, const char* purpose, OwnedComm* out) {
  const int rc = MPI_Comm_set_errhandler(comm.get(), MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_set_errhandler", purpose);
  *out = std::move(comm);
  return Status::OK();
}

}  // namespace

OwnedComm::OwnedComm(MPI_Comm comm) : comm_(comm) { Register(comm_); }

OwnedComm::OwnedComm(OwnedComm&& other) noexcept : comm_(other.release()) { Register(comm_); }

OwnedComm& OwnedComm::operator=(OwnedComm&& other) noexcept {
  if (this != &other) {
    Free();
    comm_ = other.release();
    Register(comm_);
  }
  return *this;
}

MPI_Comm OwnedComm::release() {
  Unregister(comm_);
  return std::exchange(comm_, MPI_COMM_NULL);
}

void OwnedComm::Free() {
  if (comm_ == MPI_COMM_NULL) return;
  std::lock_guard<std::mutex> lock(Live().mutex);
  Live().revoked.erase(comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize nothing may be freed; the process is ending. Freeing
  // is local, also for a revoked communicator: it never waits for peers.
  if (!finalized) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

int RevokeOwnedComms() {
  int count = 0;
#if defined(MPIX_ERR_REVOKED)
  std::lock_guard<std::mutex> lock(Live().mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return 0;
  for (auto& [comm, revoked] : Live().revoked) {
    if (revoked) continue;
    revoked = true;
    // A failure to revoke (a communicator already revoked by a peer, say)
    // changes nothing: its calls fail anyway.
    if (MPIX_Comm_revoke(comm) == MPI_SUCCESS) ++count;
  }
#endif
  return count;
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
