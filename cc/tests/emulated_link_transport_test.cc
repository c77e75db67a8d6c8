// The emulated link against its model: one-way times by ping-pong over the
// in-process transport at 1, 10 and 100 Gb/s for 64 KiB..64 MiB and at
// 10 us..1 ms latency for 8 B; messages within a host untouched; a rank's
// inter-host messages queued on its NIC; every allreduce algorithm correct
// and deadlock-free on top of it with rendezvous sends; bad settings named.
//
// Timing checks: the emulator only ever delays, so a measurement can be too
// slow (a loaded machine, or a wrapped transport that cannot move the bytes
// as fast as the modelled link) but never faster than the model. Each cell
// takes the fastest of several round trips (load only adds time), and is
// held to the 10% (bandwidth) or 20% (latency) bound when this machine can
// show it: the emulator over an instant link (its header and payload through
// the in-process transport, no modelled delay) moves the message within the
// modelled time, and a wait like the emulator's (a sleep, then yielding until
// the time) ends late by under half the bound;
// every other cell is held to "not faster than the model" and printed with
// those two figures, so the limit is visible rather than hidden in a loose
// bound. An exchange dates its outgoing message at the call.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cc/core/collectives/allreduce.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/transport/emulated_link_transport.h"
#include "cc/core/tuning/hierarchical_planner.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AllreduceAlgorithm;
using tfdist::DataType;
using tfdist::EmulatedLink;
using tfdist::EmulatedLinkTransport;
using tfdist::HostLayout;
using tfdist::InProcessFabric;
using tfdist::InProcessSendMode;
using tfdist::ReduceOp;
using tfdist::RunOnThreads;
using tfdist::Status;
using tfdist::Transport;
using Clock = std::chrono::steady_clock;

constexpr double kGigabit = 1e9 / 8;  // bytes per second

// How late this machine ends a wait of `wait_s` the way the emulator waits
// for a message (emulated_link_transport.cc: asleep until the last 200 us,
// then yielding until the time), the best of several tries, like the
// measurements it is compared with. Under load the yielding part can hand
// the core to another thread for a whole scheduler slice (about a
// millisecond, in every try: a 1 ms latency then measured 2 ms one way while
// other jobs ran); a short sleep alone does not show that.
double WakeUpLateness(double wait_s) {
#ifdef __linux__
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // as the emulator's sleeping threads do
#endif
  const auto wait = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(wait_s, 2e-3)));
  const auto poll_window = std::chrono::microseconds(200);
  std::vector<double> samples;
  for (int i = 0; i < 21; ++i) {
    const auto until = Clock::now() + wait;
    if (Clock::now() < until - poll_window) std::this_thread::sleep_until(until - poll_window);
    while (Clock::now() < until) std::this_thread::yield();
    samples.push_back(std::chrono::duration<double>(Clock::now() - until).count());
  }
  return *std::min_element(samples.begin(), samples.end());
}

// Fastest one-way time (half a round trip) between ranks 0 and 1 of a
// two-rank fabric, through `wrap` (which may return the transport itself).
// Repeats until `rounds` samples or about `budget_s` seconds.
double OneWaySeconds(size_t bytes, const EmulatedLink* link, int rounds, double budget_s) {
  std::vector<unsigned char> buffers[2] = {std::vector<unsigned char>(bytes),
                                           std::vector<unsigned char>(bytes)};
  std::vector<double> samples;
  const std::vector<Status> statuses = RunOnThreads(2, [&](Transport& inner) {
    std::unique_ptr<EmulatedLinkTransport> emulated;
    if (link != nullptr) {
      emulated = std::make_unique<EmulatedLinkTransport>(inner, std::vector<int>{0, 1}, *link);
    }
    Transport& transport = emulated ? static_cast<Transport&>(*emulated) : inner;
    unsigned char* data = buffers[transport.rank()].data();
    const auto begin = Clock::now();
    for (int round = 0; round < rounds + 1; ++round) {
      // Rank 0 decides when to stop and tells rank 1 with the first byte.
      if (transport.rank() == 0) {
        const bool last = round == rounds ||
                          std::chrono::duration<double>(Clock::now() - begin).count() > budget_s;
        data[0] = last ? 1 : 0;
        const auto start = Clock::now();
        TFDIST_RETURN_IF_ERROR(transport.Send(1, data, bytes, 5));
        TFDIST_RETURN_IF_ERROR(transport.Recv(1, data, bytes, 5));
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        if (round > 0) samples.push_back(seconds / 2);  // round 0 warms up
        if (last) break;
      } else {
        TFDIST_RETURN_IF_ERROR(transport.Recv(0, data, bytes, 5));
        const bool last = data[0] == 1;
        TFDIST_RETURN_IF_ERROR(transport.Send(0, data, bytes, 5));
        if (last) break;
      }
    }
    return Status::OK();
  });
  for (const Status& status : statuses) CHECK_OK(status);
  return samples.empty() ? 0.0 : *std::min_element(samples.begin(), samples.end());
}

// Holds one cell to `tolerance` where the machine can show it (see the top).
void CheckCell(const std::string& label, size_t bytes, const EmulatedLink& link,
               double tolerance) {
  const double model = tfdist::EmulatedMessageSeconds(link, bytes);
  // What the machine takes to carry the message through the emulator with no
  // modelled delay: two messages (header and payload), not the bare
  // transport's one. Gating on the bare transport let a sanitizer build hold
  // the 10 us cell to 20% with 8.1 us of transport alone, and the header's
  // second message took it to 12.1 us.
  const EmulatedLink instant{1e18, 0.0};
  double emulator_alone = OneWaySeconds(bytes, &instant, 5, 0.2);
  double lateness = WakeUpLateness(model);
  // Other work on the machine only ever delays a message, so the fastest of
  // up to three tries is the emulator's own time; the lower bound below is
  // checked on that fastest one, the strictest.
  double measured = OneWaySeconds(bytes, &link, 9, 0.6);
  for (int retry = 0; retry < 2 && measured / model > 1.0 + tolerance; ++retry) {
    measured = std::min(measured, OneWaySeconds(bytes, &link, 9, 0.6));
  }
  const double ratio = measured / model;
  if (ratio > 1.0 + tolerance) {
    // Too slow: ask again what the machine can show, now, under whatever
    // load slowed the tries (a busy machine copied 64 MiB in 36 ms before
    // them and took 62 ms in them, against a 54 ms model).
    emulator_alone = std::max(emulator_alone, OneWaySeconds(bytes, &instant, 5, 0.2));
    lateness = std::max(lateness, WakeUpLateness(model));
  }
  CHECK_EQ_MSG(ratio >= 1.0 - tolerance, true,
               label << ": faster than the model: " << measured << " s vs " << model << " s");
  // The payload moves while the receiver waits for its arrival time, so the
  // emulator's own time only shows where it exceeds the model; a late
  // wake-up always adds.
  const bool checkable = emulator_alone <= 0.9 * model && lateness <= 0.5 * tolerance * model;
  std::printf("  %s: model %.3g s, measured %.3g s (ratio %.3f); emulator over an instant "
              "link %.3g s, wake-up lateness %.3g s%s\n",
              label.c_str(), model, measured, ratio, emulator_alone, lateness,
              checkable ? "" : ": machine too slow to check the bound");
  if (checkable) {
    CHECK_EQ_MSG(ratio <= 1.0 + tolerance, true,
                 label << ": " << measured << " s vs model " << model << " s (ratio " << ratio
                       << ")");
  }
}

}  // namespace

TFDIST_TEST(EmulatedLinkBandwidthMatchesModel) {
  for (double gigabits : {1.0, 10.0, 100.0}) {
    // Under a sanitizer the largest message shrinks: a race needs threads to meet, not
    // 64 MiB at 1 Gb/s, and each try of that cell costs seconds of instrumented copying.
    const size_t largest = kUnderThreadSanitizer || kUnderAddressSanitizer
                               ? size_t{8} << 20 : size_t{64} << 20;
    for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, largest}) {
      const EmulatedLink link{gigabits * kGigabit, 0.0};
      CheckCell(std::to_string(static_cast<int>(gigabits)) + " Gb/s " +
                    std::to_string(bytes) + " B",
                bytes, link, 0.10);
    }
  }
}

TFDIST_TEST(EmulatedLinkLatencyMatchesModel) {
  for (double latency : {10e-6, 100e-6, 1e-3}) {
    const EmulatedLink link{100 * kGigabit, latency};
    CheckCell("latency " + std::to_string(latency) + " s, 8 B", 8, link, 0.20);
  }
}

TFDIST_TEST(EmulatedLinkLeavesIntraHostMessagesAlone) {
  // One byte a second between hosts; ranks 0 and 1 share a host.
  const EmulatedLink slow{1.0, 1.0};
  const auto start = Clock::now();
  const std::vector<Status> statuses = RunOnThreads(3, [&](Transport& inner) {
    EmulatedLinkTransport transport(inner, {0, 0, 1}, slow);
    std::vector<unsigned char> data(1 << 20, 1);
    if (transport.rank() == 0) return transport.Send(1, data.data(), data.size(), 1);
    if (transport.rank() == 1) return transport.Recv(0, data.data(), data.size(), 1);
    return Status::OK();
  });
  for (const Status& status : statuses) CHECK_OK(status);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 0.5);
}

TFDIST_TEST(EmulatedLinkQueuesMessagesOnTheSendersNic) {
  // Two 1 MiB messages posted together at 1 Gb/s: the second arrives two wire
  // times after they were posted, not one. (A lower bound only: a loaded
  // machine may deliver later, never earlier.)
  const EmulatedLink link{kGigabit, 0.0};
  const size_t bytes = size_t{1} << 20;
  const double wire = static_cast<double>(bytes) / link.bytes_per_second;
  double second_arrival = 0.0;
  std::atomic<int64_t> posted_ticks{0};
  const std::vector<Status> statuses = RunOnThreads(2, [&](Transport& inner) {
    EmulatedLinkTransport transport(inner, {0, 1}, link);
    std::vector<unsigned char> a(bytes), b(bytes);
    if (transport.rank() == 0) {
      posted_ticks = Clock::now().time_since_epoch().count();
      auto first = transport.StartSend(1, a.data(), bytes, 1);
      auto second = transport.StartSend(1, b.data(), bytes, 2);
      TFDIST_RETURN_IF_ERROR(first->Wait());
      return second->Wait();
    }
    TFDIST_RETURN_IF_ERROR(transport.Recv(0, a.data(), bytes, 1));
    TFDIST_RETURN_IF_ERROR(transport.Recv(0, b.data(), bytes, 2));
    const Clock::time_point posted{Clock::duration(posted_ticks.load())};
    second_arrival = std::chrono::duration<double>(Clock::now() - posted).count();
    return Status::OK();
  });
  for (const Status& status : statuses) CHECK_OK(status);
  CHECK_EQ_MSG(second_arrival >= 2 * wire, true,
               "second message " << second_arrival << " s after posting; wire time " << wire);
}

namespace {

// Posts every receive 20 ms late, as MPI on shared memory does when the
// posted receive finds a large message already announced and copies it.
class SlowToReceive : public Transport {
 public:
  explicit SlowToReceive(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::unique_ptr<tfdist::PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                               int tag) override {
    return inner_.StartSend(peer, data, bytes, tag);
  }
  std::unique_ptr<tfdist::PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                               int tag) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return inner_.StartRecv(peer, data, bytes, tag);
  }

 private:
  Transport& inner_;
};

}  // namespace

TFDIST_TEST(EmulatedLinkDatesAnExchangeAtTheCall) {
  // Rank 0 exchanges with rank 1 on another host over a transport that is
  // slow to post receives; its outgoing message must still leave when the
  // exchange was called, not after its receive was posted. Rank 1 reads the
  // arrival time off the message's header (the emulator's EmulatedHeader on
  // the tag) from the transport underneath.
  const EmulatedLink link{kGigabit, 100e-6};
  const size_t bytes = 4096;
  const double model = tfdist::EmulatedMessageSeconds(link, bytes);
  std::atomic<int64_t> called_ticks{0};
  double arrival_after_call = 0.0;
  const std::vector<Status> statuses = RunOnThreads(2, [&](Transport& inner) {
    std::vector<unsigned char> out(bytes, 1), in(bytes, 0);
    if (inner.rank() == 0) {
      SlowToReceive slow(inner);
      EmulatedLinkTransport transport(slow, {0, 1}, link);
      called_ticks = Clock::now().time_since_epoch().count();
      return transport.SendRecv(1, out.data(), bytes, 1, in.data(), bytes, 1);
    }
    tfdist::EmulatedHeader header;
    TFDIST_RETURN_IF_ERROR(inner.Recv(0, &header, sizeof header, 1));
    TFDIST_RETURN_IF_ERROR(inner.Recv(0, in.data(), bytes, 1));
    arrival_after_call =
        std::chrono::duration<double>(Clock::duration(header.arrival_ticks - called_ticks.load()))
            .count();
    EmulatedLinkTransport transport(inner, {0, 1}, link);
    return transport.Send(0, out.data(), bytes, 1);
  });
  for (const Status& status : statuses) CHECK_OK(status);
  CHECK_EQ_MSG(arrival_after_call >= model && arrival_after_call < model + 10e-3, true,
               "arrives " << arrival_after_call << " s after the call; model " << model);
}

TFDIST_TEST(EveryAllreduceRunsOverEmulatedLinks) {
  const EmulatedLink link{10 * kGigabit, 20e-6};
  const std::vector<HostLayout> layouts = {HostLayout::Consecutive(4, 2),
                                           HostLayout::Consecutive(8, 4),
                                           HostLayout::Consecutive(6, 3),
                                           HostLayout::Consecutive(5, 5)};
  for (const HostLayout& layout : layouts) {
    const int size = layout.size();
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRing,
          AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kHierarchical}) {
      for (size_t count : {size_t{0}, size_t{3}, size_t{100000}}) {
        std::vector<Bytes> buffers;
        for (int rank = 0; rank < size; ++rank) {
          buffers.push_back(MakeRankInput(DataType::kFloat32, ReduceOp::kSum, rank, size, count));
        }
        const Bytes expected = SequentialReduce(buffers, count, DataType::kFloat32, ReduceOp::kSum);
        InProcessFabric fabric(size, FabricOptions(InProcessSendMode::kRendezvous));
        const tfdist::NetworkCost network =
            tfdist::LinearNetwork({1e-6, 1e-10, 0.0}, {20e-6, 8e-10, 0.0});
        const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& inner) {
          EmulatedLinkTransport transport(inner, layout.host_of_rank(), link);
          return tfdist::RunAllreduce(algorithm, transport, layout,
                                      tfdist::CostModelPlanner(network),
                                      buffers[inner.rank()].data(), count, DataType::kFloat32,
                                      ReduceOp::kSum);
        });
        for (int rank = 0; rank < size; ++rank) {
          CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"),
                       tfdist::AllreduceAlgorithmName(algorithm) << " P=" << size);
          CHECK_EQ_MSG(FirstMismatch(buffers[rank], expected, 4), -1LL,
                       tfdist::AllreduceAlgorithmName(algorithm) << " P=" << size
                                                                 << " count=" << count);
        }
        CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
      }
    }
  }
}

TFDIST_TEST(EmulatedLinkSettingsAreChecked) {
  const Status zero = tfdist::CheckEmulatedLink({0.0, 0.0});
  CHECK(!zero.ok());
  CHECK(zero.message().find("TFDIST_EMULATED_BANDWIDTH") != std::string::npos);
  const Status negative = tfdist::CheckEmulatedLink({1e9, -1e-6});
  CHECK(!negative.ok());
  CHECK(negative.message().find("TFDIST_EMULATED_LATENCY") != std::string::npos);
  CHECK_OK(tfdist::CheckEmulatedLink({1e9, 0.0}));
}

}  // namespace tfdist_test
