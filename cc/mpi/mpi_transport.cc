#include "cc/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "cc/mpi/mpi_wait.h"

namespace tfdist {

namespace {

// MPI counts are ints: a message above 1 GiB goes as several pieces, each
// with the same tag; MPI's non-overtaking rule keeps them in order.
constexpr size_t kMaxPieceBytes = size_t{1} << 30;

class MpiPendingOp : public PendingOp {
 public:
  MpiPendingOp(std::vector<MPI_Request> requests, Status start_status)
      : requests_(std::move(requests)), status_(std::move(start_status)) {}
  ~MpiPendingOp() override { Wait(); }

  Status Wait() override {
    if (!waited_) {
      waited_ = true;
      if (!requests_.empty()) {
        Status s = WaitAllPolitely(static_cast<int>(requests_.size()),
                                   requests_.data(), "MPI point-to-point");
        if (status_.ok()) status_ = s;
      }
    }
    return status_;
  }

 private:
  std::vector<MPI_Request> requests_;
  Status status_;
  bool waited_ = false;
};

template <typename StartPiece>
std::unique_ptr<PendingOp> StartInPieces(size_t bytes, StartPiece start) {
  std::vector<MPI_Request> requests;
  size_t offset = 0;
  Status status;
  do {
    const size_t piece = std::min(bytes - offset, kMaxPieceBytes);
    MPI_Request request;
    int rc = start(offset, static_cast<int>(piece), &request);
    if (rc != MPI_SUCCESS) {
      status = MpiError(rc, "starting an MPI point-to-point message");
      break;
    }
    requests.push_back(request);
    offset += piece;
  } while (offset < bytes);
  return std::make_unique<MpiPendingOp>(std::move(requests), status);
}

}  // namespace

Status MpiTransport::Create(MPI_Comm comm, std::unique_ptr<MpiTransport>* out) {
  MPI_Comm duplicate;
  int rc = MPI_Comm_dup(comm, &duplicate);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
  *out = std::make_unique<MpiTransport>(duplicate);
  return Status::OK();
}

MpiTransport::MpiTransport(MPI_Comm duplicate) : comm_(duplicate) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  thread_multiple_ = provided == MPI_THREAD_MULTIPLE;
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

std::unique_ptr<PendingOp> MpiTransport::StartSend(int peer, const void* data,
                                                   size_t bytes, int tag) {
  const char* base = static_cast<const char*>(data);
  return StartInPieces(bytes, [&](size_t offset, int piece, MPI_Request* r) {
    return MPI_Isend(base + offset, piece, MPI_BYTE, peer, tag, comm_, r);
  });
}

std::unique_ptr<PendingOp> MpiTransport::StartRecv(int peer, void* data,
                                                   size_t bytes, int tag) {
  char* base = static_cast<char*>(data);
  return StartInPieces(bytes, [&](size_t offset, int piece, MPI_Request* r) {
    return MPI_Irecv(base + offset, piece, MPI_BYTE, peer, tag, comm_, r);
  });
}

}  // namespace tfdist
