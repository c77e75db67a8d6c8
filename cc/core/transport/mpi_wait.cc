#include "cc/core/transport/mpi_wait.h"

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

namespace tfdist {

namespace {
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kYieldForTransfer = std::chrono::microseconds(10000);
constexpr auto kYieldForRendezvous = std::chrono::microseconds(200);
constexpr auto kFirstSleep = std::chrono::microseconds(20);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);
}  // namespace

Status MpiError(int code, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Status::Internal(std::string(what) + ": " + std::string(text, length));
}

Status WaitAllPolitely(int count, MPI_Request* requests, const char* what,
                       WaitKind kind) {
  const auto yield_for =
      kind == WaitKind::kTransfer ? kYieldForTransfer : kYieldForRendezvous;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto sleep = kFirstSleep;
  while (true) {
    int done = 0;
    int rc = MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    if (done) return Status::OK();
    const auto waited = Clock::now() - start;
    if (waited < kSpinFor) continue;
    if (waited < yield_for) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < kMaxSleep) sleep *= 2;
  }
}

}  // namespace tfdist
