#include "cc/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "cc/mpi/mpi_error.h"
#include "cc/mpi/mpi_wait.h"

namespace tfdist {

namespace {

// MPI counts are ints: a message above 1 GiB goes as several pieces, each
// with the same tag; MPI's non-overtaking rule keeps them in order.
constexpr size_t kMaxPieceBytes = size_t{1} << 30;

// One message, as an error names it; formatted only when one occurs.
struct Message {
  bool send;
  int peer;
  size_t bytes;
  int tag;

  std::string Describe() const {
    return std::string("a point-to-point ") + (send ? "send of " : "receive of ") +
           std::to_string(bytes) + " bytes " + (send ? "to" : "from") + " rank " +
           std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  }
};

class MpiPendingOp : public PendingOp {
 public:
  MpiPendingOp(MPI_Comm comm, Message message, std::vector<MPI_Request> requests,
               Status start_status, bool oversubscribed)
      : comm_(comm),
        oversubscribed_(oversubscribed),
        message_(message),
        requests_(std::move(requests)),
        status_(std::move(start_status)) {}
  ~MpiPendingOp() override { Wait(); }

  Status Wait() override {
    if (!waited_) {
      waited_ = true;
      if (!requests_.empty()) {
        const int rc = WaitAllPolitelyCode(static_cast<int>(requests_.size()),
                                           requests_.data(), WaitKind::kTransfer,
                                           oversubscribed_);
        if (rc != MPI_SUCCESS && status_.ok()) {
          status_ = MpiError(rc, "MPI_Testall", message_.Describe(), comm_);
        }
      }
    }
    return status_;
  }

 private:
  MPI_Comm comm_;
  bool oversubscribed_;
  Message message_;
  std::vector<MPI_Request> requests_;
  Status status_;
  bool waited_ = false;
};

template <typename StartPiece>
std::unique_ptr<PendingOp> StartInPieces(MPI_Comm comm, const Message& message,
                                         const char* call, bool oversubscribed,
                                         StartPiece start) {
  std::vector<MPI_Request> requests;
  size_t offset = 0;
  Status status;
  do {
    const size_t piece = std::min(message.bytes - offset, kMaxPieceBytes);
    MPI_Request request;
    int rc = start(offset, static_cast<int>(piece), &request);
    if (rc != MPI_SUCCESS) {
      status = MpiError(rc, call, message.Describe(), comm);
      break;
    }
    requests.push_back(request);
    offset += piece;
  } while (offset < message.bytes);
  return std::make_unique<MpiPendingOp>(comm, message, std::move(requests), status,
                                        oversubscribed);
}

}  // namespace

Status MpiTransport::Create(MPI_Comm comm, std::unique_ptr<MpiTransport>* out) {
  OwnedComm duplicate;
  TFDIST_RETURN_IF_ERROR(DuplicateComm(comm, "the collectives' messages", &duplicate));
  int rank = 0;
  int size = 1;
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Comm_rank(duplicate.get(), &rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(duplicate.get(), &size);
  if (rc != MPI_SUCCESS) {
    return MpiError(rc, "MPI_Comm_rank/size", "starting the transport", duplicate.get());
  }
  rc = MPI_Query_thread(&provided);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Query_thread", "starting the transport");
  *out = std::make_unique<MpiTransport>(std::move(duplicate), rank, size,
                                        provided == MPI_THREAD_MULTIPLE);
  return Status::OK();
}

MpiTransport::MpiTransport(OwnedComm comm, int rank, int size, bool thread_multiple)
    : comm_(std::move(comm)), rank_(rank), size_(size), thread_multiple_(thread_multiple) {}

std::unique_ptr<PendingOp> MpiTransport::StartSend(int peer, const void* data,
                                                   size_t bytes, int tag) {
  const char* base = static_cast<const char*>(data);
  return StartInPieces(comm(), Message{true, peer, bytes, tag}, "MPI_Isend", oversubscribed_,
                       [&](size_t offset, int piece, MPI_Request* r) {
                         return MPI_Isend(base + offset, piece, MPI_BYTE, peer, tag, comm(), r);
                       });
}

std::unique_ptr<PendingOp> MpiTransport::StartRecv(int peer, void* data,
                                                   size_t bytes, int tag) {
  char* base = static_cast<char*>(data);
  return StartInPieces(comm(), Message{false, peer, bytes, tag}, "MPI_Irecv", oversubscribed_,
                       [&](size_t offset, int piece, MPI_Request* r) {
                         return MPI_Irecv(base + offset, piece, MPI_BYTE, peer, tag, comm(), r);
                       });
}

}  // namespace tfdist
