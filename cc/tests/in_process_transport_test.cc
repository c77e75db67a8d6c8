// The in-process transport's contract: FIFO per (source, destination, tag) in
// posting order, zero-byte messages, size mismatches and deadlocks reported
// as errors rather than hangs, and abort on the first failing rank.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::InProcessFabric;
using tfdist::InProcessFabricOptions;
using tfdist::InProcessSendMode;
using tfdist::Status;
using tfdist::StatusCode;
using tfdist::Transport;

const InProcessSendMode kModes[] = {InProcessSendMode::kBuffered,
                                    InProcessSendMode::kRendezvous};

}  // namespace

TFDIST_TEST(InProcessMessagesArriveInOrderPerTag) {
  for (InProcessSendMode mode : kModes) {
    InProcessFabric fabric(2, FabricOptions(mode));
    std::vector<int> received;
    const std::vector<Status> statuses =
        RunOnThreads(fabric, [&](Transport& transport) -> Status {
          if (transport.rank() == 0) {
            // Interleave two tags; start all sends before waiting on any.
            std::vector<std::unique_ptr<tfdist::PendingOp>> sends;
            const int values[] = {10, 20, 11, 21, 12};
            const int tags[] = {1, 2, 1, 2, 1};
            for (int i = 0; i < 5; ++i) {
              sends.push_back(transport.StartSend(1, &values[i], sizeof(int), tags[i]));
            }
            for (auto& send : sends) TFDIST_RETURN_IF_ERROR(send->Wait());
            return Status::OK();
          }
          // Tag 2 first; then two tag-1 receives posted together but
          // waited in reverse order: posting order decides the match.
          int a = 0, b = 0, c = 0, d = 0, e = 0;
          TFDIST_RETURN_IF_ERROR(transport.Recv(0, &a, sizeof(int), 2));
          TFDIST_RETURN_IF_ERROR(transport.Recv(0, &b, sizeof(int), 2));
          auto first = transport.StartRecv(0, &c, sizeof(int), 1);
          auto second = transport.StartRecv(0, &d, sizeof(int), 1);
          TFDIST_RETURN_IF_ERROR(second->Wait());
          TFDIST_RETURN_IF_ERROR(first->Wait());
          TFDIST_RETURN_IF_ERROR(transport.Recv(0, &e, sizeof(int), 1));
          received = {a, b, c, d, e};
          return Status::OK();
        });
    CHECK_OK(statuses[0]);
    CHECK_OK(statuses[1]);
    CHECK((received == std::vector<int>{20, 21, 10, 11, 12}));
    CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
  }
}

TFDIST_TEST(InProcessZeroByteMessagesSynchronise) {
  for (InProcessSendMode mode : kModes) {
    InProcessFabric fabric(3, FabricOptions(mode));
    const std::vector<Status> statuses =
        RunOnThreads(fabric, [&](Transport& transport) -> Status {
          const int right = (transport.rank() + 1) % 3;
          const int left = (transport.rank() + 2) % 3;
          // Null pointers are fine for zero bytes.
          TFDIST_RETURN_IF_ERROR(
              transport.SendRecv(right, nullptr, 0, left, nullptr, 0, 5));
          return transport.SendRecv(left, nullptr, 0, right, nullptr, 0, 5);
        });
    for (const Status& status : statuses) CHECK_OK(status);
    CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
  }
}

TFDIST_TEST(InProcessSelfSendAndLargeMessage) {
  for (InProcessSendMode mode : kModes) {
    InProcessFabric fabric(2, FabricOptions(mode));
    const std::vector<Status> statuses =
        RunOnThreads(fabric, [&](Transport& transport) -> Status {
          const Bytes payload = PatternBlock(transport.rank(), 0, 3 << 20);
          Bytes received(payload.size());
          TFDIST_RETURN_IF_ERROR(transport.SendRecv(
              transport.rank(), payload.data(), payload.size(), transport.rank(),
              received.data(), received.size(), 0));
          if (received != payload) return Status::Internal("self-send corrupted");
          const int peer = 1 - transport.rank();
          TFDIST_RETURN_IF_ERROR(transport.SendRecv(peer, payload.data(),
                                                    payload.size(), peer,
                                                    received.data(),
                                                    received.size(), 0));
          if (received != PatternBlock(peer, 0, 3 << 20)) {
            return Status::Internal("exchange corrupted");
          }
          return Status::OK();
        });
    CHECK_OK(statuses[0]);
    CHECK_OK(statuses[1]);
  }
}

TFDIST_TEST(InProcessSizeMismatchIsAnErrorNotAHang) {
  for (InProcessSendMode mode : kModes) {
    InProcessFabric fabric(2, FabricOptions(mode));
    const auto start = std::chrono::steady_clock::now();
    const std::vector<Status> statuses =
        RunOnThreads(fabric, [&](Transport& transport) -> Status {
          char data[16] = {};
          if (transport.rank() == 0) return transport.Send(1, data, 8, 3);
          return transport.Recv(0, data, 16, 3);
        });
    CHECK(statuses[1].code() == StatusCode::kInternal);
    CHECK(statuses[1].message().find("mismatch") != std::string::npos);
    CHECK(statuses[1].message().find("sent 8 bytes") != std::string::npos);
    if (mode == InProcessSendMode::kRendezvous) {
      CHECK(statuses[0].code() == StatusCode::kInternal);
    } else {
      CHECK_OK(statuses[0]);
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }
}

TFDIST_TEST(InProcessMissingSendTimesOut) {
  InProcessFabricOptions options;
  options.wait_timeout = std::chrono::milliseconds(50);
  InProcessFabric fabric(2, options);
  const std::vector<Status> statuses =
      RunOnThreads(fabric, [&](Transport& transport) -> Status {
        if (transport.rank() == 0) return Status::OK();
        int value = 0;
        return transport.Recv(0, &value, sizeof(value), 9);
      });
  CHECK_OK(statuses[0]);
  CHECK(statuses[1].code() == StatusCode::kInternal);
  CHECK(statuses[1].message().find("timed out") != std::string::npos);
}

TFDIST_TEST(InProcessFailingRankAbortsItsPeers) {
  // No timeout: only the abort can release rank 1.
  InProcessFabricOptions options;
  options.wait_timeout = std::chrono::milliseconds(0);
  InProcessFabric fabric(3, options);
  const std::vector<Status> statuses =
      RunOnThreads(fabric, [&](Transport& transport) -> Status {
        if (transport.rank() == 0) return Status::InvalidArgument("bad input");
        int value = 0;
        return transport.Recv(0, &value, sizeof(value), 1);
      });
  CHECK(statuses[0].code() == StatusCode::kInvalidArgument);
  CHECK(statuses[1].code() == StatusCode::kAborted);
  CHECK(statuses[1].message().find("bad input") != std::string::npos);
  CHECK(statuses[2].code() == StatusCode::kAborted);
}

TFDIST_TEST(InProcessPeerOutOfRangeIsInvalidArgument) {
  const std::vector<Status> statuses =
      tfdist::RunOnThreads(2, [&](Transport& transport) -> Status {
        int value = 0;
        Status send = transport.Send(2, &value, sizeof(value), 0);
        Status receive = transport.Recv(-1, &value, sizeof(value), 0);
        if (send.code() != StatusCode::kInvalidArgument ||
            receive.code() != StatusCode::kInvalidArgument) {
          return Status::Internal("expected InvalidArgument");
        }
        return Status::OK();
      });
  CHECK_OK(statuses[0]);
  CHECK_OK(statuses[1]);
}

TFDIST_TEST(InProcessUndeliveredMessagesAreCounted) {
  InProcessFabric fabric(2);
  const std::vector<Status> statuses =
      RunOnThreads(fabric, [&](Transport& transport) -> Status {
        int value = 7;
        if (transport.rank() == 0) return transport.Send(1, &value, sizeof(value), 0);
        return Status::OK();
      });
  CHECK_OK(statuses[0]);
  CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{1});
}

}  // namespace tfdist_test
