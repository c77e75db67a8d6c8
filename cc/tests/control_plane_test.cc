// TransportControlPlane: the AND allreduce, the allgatherv and the barrier
// give every rank the sequential answer for every group size, in both send
// modes, and leave no stray message; the settings check runs through it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/runtime/settings_agreement.h"
#include "cc/testing/in_process_transport.h"
#include "cc/core/control/transport_control_plane.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::InProcessSendMode;
using tfdist::Status;
using tfdist::Transport;
using tfdist::TransportControlPlane;
using tfdist::WaitKind;

// Rank r's word w: all bits but those that some rank clears.
uint64_t Word(int rank, size_t w) {
  return ~(uint64_t{1} << ((rank * 7 + w * 3) % 64));
}

std::vector<uint8_t> BytesOf(int rank) {
  // Rank 1 sends nothing: empty contributions must work.
  std::vector<uint8_t> bytes(rank == 1 ? 0 : 3 * rank + 2);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(rank * 31 + i);
  return bytes;
}

}  // namespace

TFDIST_TEST(ControlPlaneOverTransportMatchesTheSequentialAnswer) {
  for (InProcessSendMode mode : {InProcessSendMode::kBuffered, InProcessSendMode::kRendezvous}) {
    for (int size : SweepGroupSizes()) {
      constexpr size_t kWords = 3;
      std::vector<uint64_t> expected(kWords, ~uint64_t{0});
      for (int r = 0; r < size; ++r) {
        for (size_t w = 0; w < kWords; ++w) expected[w] &= Word(r, w);
      }
      tfdist::InProcessFabric fabric(size, FabricOptions(mode));
      const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& transport) {
        TransportControlPlane plane(transport);
        const int me = plane.rank();
        CHECK_EQ(plane.size(), size);
        // Twice, so that a second call meets no leftovers of the first.
        for (int repeat = 0; repeat < 2; ++repeat) {
          std::vector<uint64_t> words(kWords);
          for (size_t w = 0; w < kWords; ++w) words[w] = Word(me, w);
          TFDIST_RETURN_IF_ERROR(plane.AndAllreduce(words.data(), kWords, WaitKind::kRendezvous));
          CHECK_EQ_MSG(words == expected, true, "AND, size " << size << " rank " << me);

          std::vector<std::vector<uint8_t>> per_rank;
          TFDIST_RETURN_IF_ERROR(plane.Allgatherv(BytesOf(me), WaitKind::kRendezvous, &per_rank));
          CHECK_EQ_MSG(per_rank.size(), static_cast<size_t>(size), "rank " << me);
          for (int r = 0; r < size && r < static_cast<int>(per_rank.size()); ++r) {
            CHECK_EQ_MSG(per_rank[r] == BytesOf(r), true,
                         "allgatherv, size " << size << " rank " << me << " from " << r);
          }
          TFDIST_RETURN_IF_ERROR(plane.Barrier(WaitKind::kRendezvous));
        }
        return Status::OK();
      });
      for (const Status& s : statuses) CHECK_OK(s);
      CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, "size " << size);
    }
  }
}

TFDIST_TEST(ControlPlaneBarrierWaitsForTheLastRank) {
  constexpr int kSize = 5;
  std::atomic<bool> late_rank_arrived{false};
  const std::vector<Status> statuses = tfdist::RunOnThreads(kSize, [&](Transport& transport) {
    TransportControlPlane plane(transport);
    if (plane.rank() == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      late_rank_arrived = true;
    }
    TFDIST_RETURN_IF_ERROR(plane.Barrier(WaitKind::kRendezvous));
    CHECK_EQ_MSG(late_rank_arrived.load(), true, "rank " << plane.rank() << " left early");
    return Status::OK();
  });
  for (const Status& s : statuses) CHECK_OK(s);
}

TFDIST_TEST(ControlPlaneAbortRunsTheGivenAction) {
  tfdist::InProcessFabric fabric(2);
  std::string reason;
  TransportControlPlane plane(fabric.transport(0),
                              [&](const std::string& why) { fabric.Abort(why); reason = why; });
  plane.Abort("stalled");
  CHECK_EQ(reason, std::string("stalled"));
  // Every wait on the fabric now fails instead of hanging.
  uint64_t word = 0;
  CHECK(fabric.transport(1).Recv(0, &word, sizeof word, 1).code() ==
        tfdist::StatusCode::kAborted);
}

TFDIST_TEST(SettingsCheckRunsThroughTheControlPlane) {
  constexpr int kSize = 3;
  std::vector<Status> verdicts(kSize);
  tfdist::RunOnThreads(kSize, [&](Transport& transport) {
    TransportControlPlane plane(transport);
    tfdist::RuntimeConfig config;
    if (plane.rank() == 2) config.cache_capacity = 7;
    verdicts[plane.rank()] = tfdist::CheckSettingsAgreeAcross(plane, config);
    return Status::OK();
  });
  for (int r = 0; r < kSize; ++r) {
    CHECK_EQ_MSG(verdicts[r].message(), verdicts[0].message(), "rank " << r);
    CHECK(verdicts[r].code() == tfdist::StatusCode::kFailedPrecondition);
    CHECK(verdicts[r].message().find("TFDIST_CACHE_CAPACITY: rank 0 has 1024, rank 2 has 7") !=
          std::string::npos);
  }
}

}  // namespace tfdist_test
