#include "cc/mpi/mpi_error.h"

#include "cc/mpi/mpi_comm.h"

#include <atomic>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: ULFM's MPIX_* when it was built with them
#endif

namespace tfdist {

namespace {

std::atomic<bool> peer_failure_seen{false};

std::string ErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  return std::string(text, length);
}

std::string RankList(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

std::string MpiErrorText(int code) {
  std::string text = ErrorString(code);
  int error_class = code;
  if (MPI_Error_class(code, &error_class) == MPI_SUCCESS && error_class != code) {
    const std::string class_text = ErrorString(error_class);
    if (text.find(class_text) == std::string::npos) text = class_text + ": " + text;
  }
  return text;
}

bool IsProcessFailure(int code) {
#if defined(MPIX_ERR_PROC_FAILED) && defined(MPIX_ERR_REVOKED)
  int error_class = code;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) error_class = code;
  return error_class == MPIX_ERR_PROC_FAILED || error_class == MPIX_ERR_REVOKED;
#else
  (void)code;
  return false;
#endif
}

std::vector<int> FailedRanks(MPI_Comm comm) {
  std::vector<int> ranks;
#if defined(MPIX_ERR_PROC_FAILED)
  if (comm == MPI_COMM_NULL) return ranks;
  MPI_Group failed = MPI_GROUP_NULL;
#if defined(OMPI_HAVE_MPIX_COMM_GET_FAILED)
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return ranks;
#else
  if (MPIX_Comm_failure_ack(comm) != MPI_SUCCESS ||
      MPIX_Comm_failure_get_acked(comm, &failed) != MPI_SUCCESS) {
    return ranks;
  }
#endif
  MPI_Group all = MPI_GROUP_NULL;
  int count = 0;
  if (MPI_Group_size(failed, &count) == MPI_SUCCESS && count > 0 &&
      MPI_Comm_group(comm, &all) == MPI_SUCCESS) {
    std::vector<int> in_failed(count);
    for (int i = 0; i < count; ++i) in_failed[i] = i;
    ranks.resize(count);
    if (MPI_Group_translate_ranks(failed, count, in_failed.data(), all, ranks.data()) !=
        MPI_SUCCESS) {
      ranks.clear();
    }
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
#else
  (void)comm;
#endif
  return ranks;
}

Status MpiError(int code, const char* call, const std::string& during, MPI_Comm comm) {
  std::string message =
      "tfdist: " + std::string(call) + " failed during " + during + ": " + MpiErrorText(code);
  if (IsProcessFailure(code)) {
    peer_failure_seen.store(true, std::memory_order_relaxed);
    // Before anything else: the peers waiting on live ranks learn of it
    // only through this.
    RevokeOwnedComms();
    // A revoke can reach a rank before ULFM's failure detector has told it
    // who died: the message then says only that a peer failed. (Waiting for
    // the notice did not help: it often takes longer than is worth delaying
    // the error, and it staggered the survivors' exits.)
    const std::vector<int> failed = FailedRanks(comm);
    if (!failed.empty()) {
      message += failed.size() == 1 ? "; rank " : "; ranks ";
      message += RankList(failed) + (failed.size() == 1 ? " has" : " have") +
                 " failed (the process died or was killed; the launcher's output says how)";
    } else {
      message += "; a peer process failed";
    }
    message += std::string(" ") + kRanksChangedMarker +
               " the job's membership changed; inside tfdist.elastic.run the survivors "
               "rebuild and carry on, otherwise restart the job (tfdistrun --elastic, or "
               "--restarts with a checkpoint)";
  }
  return Status::Internal(message);
}

bool PeerFailureSeen() { return peer_failure_seen.load(std::memory_order_relaxed); }

}  // namespace tfdist
