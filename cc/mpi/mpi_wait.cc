#include "cc/mpi/mpi_wait.h"

#include <optional>
#include <thread>
#include <vector>

#include "cc/core/transport/polite_wait.h"

namespace tfdist {

bool CoresOversubscribed(int ranks_on_node) {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 && ranks_on_node > 0 && static_cast<unsigned>(ranks_on_node) > cores;
}

int WaitAllPolitelyCode(int count, MPI_Request* requests, WaitKind kind, bool oversubscribed) {
  // MPI_ERR_IN_STATUS says only that some request failed; its status says how.
  constexpr int kInlineStatuses = 4;
  MPI_Status inline_statuses[kInlineStatuses];
  std::vector<MPI_Status> more_statuses(count > kInlineStatuses ? count : 0);
  MPI_Status* statuses = count > kInlineStatuses ? more_statuses.data() : inline_statuses;
  auto test = [&]() -> std::optional<int> {
    int done = 0;
    const int rc = MPI_Testall(count, requests, &done, statuses);
    if (rc == MPI_ERR_IN_STATUS) {
      for (int i = 0; i < count; ++i) {
        const int code = statuses[i].MPI_ERROR;
        if (code != MPI_SUCCESS && code != MPI_ERR_PENDING) return code;
      }
      return rc;
    }
    if (rc != MPI_SUCCESS) return rc;
    if (done) return MPI_SUCCESS;
    return std::nullopt;
  };
  return WaitPolitely(test, [](int rc) { return rc == MPI_SUCCESS; }, kind, oversubscribed,
                      PollsProgress::kYes);
}

Status WaitAllPolitely(MPI_Comm comm, int count, MPI_Request* requests, const char* during,
                       WaitKind kind, bool oversubscribed) {
  const int rc = WaitAllPolitelyCode(count, requests, kind, oversubscribed);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Testall", during, comm);
  return Status::OK();
}

}  // namespace tfdist
