// The "shm" allreduce with threads as ranks over heap memory standing in for
// the shared segment: against the sequential reference, bit for bit, for
// every group size of the sweep, dtype and op, counts around the group size
// and the slot size, in and out of place, scaled, over many calls that reuse
// both slots; and a peer whose process has ended makes the call fail
// instead of hanging.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/collectives/shared_memory_allreduce.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/reduction.h"
#include "cc/tests/fake_segment.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::DataTypeSize;
using tfdist::ReduceOp;
using tfdist::SharedMemoryAllreduce;
using tfdist::Status;

// Runs `body(allreduce)` on one thread per rank; returns each rank's status.
std::vector<Status> RunRanks(int size, size_t slot_bytes,
                             const std::function<Status(SharedMemoryAllreduce&)>& body) {
  FakeSegment segment(size, slot_bytes);
  std::vector<Status> statuses(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      SharedMemoryAllreduce allreduce(rank, segment.regions(), slot_bytes,
                                      /*oversubscribed=*/true);
      statuses[rank] = body(allreduce);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

std::vector<size_t> Counts(int size, size_t slot_elements) {
  const std::set<size_t> counts = {0, 1, 7, static_cast<size_t>(size - 1),
                                   static_cast<size_t>(size + 1), slot_elements - 1,
                                   slot_elements, slot_elements + 1, 3 * slot_elements + 5,
                                   1000};
  return {counts.begin(), counts.end()};
}

// Every rank's result of one call of `count` elements against the
// sequential reference, scaled by `scale`.
void CheckCall(int size, size_t slot_bytes, DataType dtype, ReduceOp op, size_t count,
               bool in_place, double scale) {
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < size; ++rank) {
    inputs.push_back(MakeRankInput(dtype, op, rank, size, count));
  }
  Bytes expected = SequentialReduce(inputs, count, dtype, op);
  if (scale != 1.0) {
    tfdist::ConvertScaled(expected.data(), dtype, expected.data(), dtype, count, scale);
  }
  const size_t bytes = count * DataTypeSize(dtype);
  std::vector<Bytes> outputs(size, Bytes(bytes, 0xAB));
  if (in_place) outputs = inputs;
  const std::vector<Status> statuses = RunRanks(size, slot_bytes, [&](SharedMemoryAllreduce& a) {
    Bytes& out = outputs[a.rank()];
    const void* in = in_place ? out.data() : inputs[a.rank()].data();
    return a.Allreduce(in, out.data(), count, dtype, op, scale);
  });
  for (int rank = 0; rank < size; ++rank) {
    const std::string label = "P=" + std::to_string(size) + " dtype=" +
                              std::to_string(static_cast<int>(dtype)) + " op=" +
                              std::to_string(static_cast<int>(op)) + " count=" +
                              std::to_string(count) + (in_place ? " in place" : "") +
                              " scale=" + std::to_string(scale) + " rank " +
                              std::to_string(rank);
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), label);
    CHECK_EQ_MSG(FirstMismatch(outputs[rank], expected, DataTypeSize(dtype)), -1LL, label);
    if (!in_place) CHECK_MSG(inputs[rank] == MakeRankInput(dtype, op, rank, size, count),
                             label << ": the input was written");
  }
}

TFDIST_TEST(SharedMemoryAllreduceMatchesSequentialReference) {
  // Slots of 256 bytes: a thousand elements take several chunks, in both slots.
  constexpr size_t kSlotBytes = 256;
  for (int size : SweepGroupSizes()) {
    for (DataType dtype : ReducibleDataTypes()) {
      for (ReduceOp op : AllReduceOps()) {
        for (size_t count : Counts(size, kSlotBytes / DataTypeSize(dtype))) {
          CheckCall(size, kSlotBytes, dtype, op, count, /*in_place=*/false, 1.0);
        }
        CheckCall(size, kSlotBytes, dtype, op, 1000, /*in_place=*/true, 1.0);
      }
    }
  }
}

TFDIST_TEST(SharedMemoryAllreduceScalesEachElementOnce) {
  // Average's 1/P, and a factor float32 does not hold exactly.
  for (int size : {2, 3, 4, 5}) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
      for (size_t count : {size_t{1}, size_t{999}, size_t{5000}}) {
        CheckCall(size, 1024, dtype, ReduceOp::kSum, count, false, 1.0 / size);
        CheckCall(size, 1024, dtype, ReduceOp::kSum, count, true, 0.1);
      }
    }
  }
}

TFDIST_TEST(SharedMemoryAllreduceKeepsStepAcrossManyCalls) {
  // One object per rank for a long sequence of calls of varying sizes, with
  // ranks delayed at random: a rank that runs ahead must not refill a slot
  // a peer still copies out.
  constexpr int kSize = 3;
  constexpr size_t kSlotBytes = 128;
  constexpr int kCalls = 200;
  std::mt19937 sizes(7);
  std::vector<size_t> counts;
  for (int i = 0; i < kCalls; ++i) counts.push_back(sizes() % 200);
  std::vector<std::vector<Bytes>> results(kSize, std::vector<Bytes>(kCalls));
  const std::vector<Status> statuses = RunRanks(kSize, kSlotBytes, [&](SharedMemoryAllreduce& a) {
    std::mt19937 delays(100 + a.rank());
    for (int i = 0; i < kCalls; ++i) {
      const Bytes in = MakeRankInput(DataType::kInt32, ReduceOp::kSum, a.rank() + i, kSize,
                                     counts[i]);
      Bytes& out = results[a.rank()][i];
      out.assign(in.size(), 0);
      if (delays() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(delays() % 300));
      TFDIST_RETURN_IF_ERROR(
          a.Allreduce(in.data(), out.data(), counts[i], DataType::kInt32, ReduceOp::kSum));
    }
    return Status::OK();
  });
  for (int rank = 0; rank < kSize; ++rank) {
    CHECK_EQ(DescribeStatus(statuses[rank]), std::string("OK"));
  }
  for (int i = 0; i < kCalls; ++i) {
    std::vector<Bytes> inputs;
    for (int rank = 0; rank < kSize; ++rank) {
      inputs.push_back(MakeRankInput(DataType::kInt32, ReduceOp::kSum, rank + i, kSize, counts[i]));
    }
    const Bytes expected = SequentialReduce(inputs, counts[i], DataType::kInt32, ReduceOp::kSum);
    for (int rank = 0; rank < kSize; ++rank) {
      CHECK_EQ_MSG(FirstMismatch(results[rank][i], expected, 4), -1LL,
                   "call " << i << " rank " << rank);
    }
  }
}

TFDIST_TEST(SharedMemoryAllreduceOverSpansIsOneVector) {
  // Spans of uneven sizes (one empty, one across several chunks), in place and
  // out of place, scaled: each piece of the result is the reference's piece.
  constexpr size_t kSlotBytes = 256;
  const std::vector<size_t> span_counts = {5, 0, 130, 1, 64, 77};
  size_t total = 0;
  for (size_t c : span_counts) total += c;
  for (int size : {1, 2, 3, 5}) {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt64, DataType::kFloat16}) {
      const size_t element = DataTypeSize(dtype);
      std::vector<Bytes> inputs;
      for (int rank = 0; rank < size; ++rank) {
        inputs.push_back(MakeRankInput(dtype, ReduceOp::kSum, rank, size, total));
      }
      Bytes expected = SequentialReduce(inputs, total, dtype, ReduceOp::kSum);
      const double scale = dtype == DataType::kInt64 ? 1.0 : 0.5;
      tfdist::ConvertScaled(expected.data(), dtype, expected.data(), dtype, total, scale);
      // Rank r's spans: even spans out of place into `outputs`, odd ones in
      // place in a copy of the input.
      std::vector<Bytes> outputs(size, Bytes(total * element, 0xCD));
      std::vector<Bytes> in_place = inputs;
      const std::vector<Status> statuses =
          RunRanks(size, kSlotBytes, [&](SharedMemoryAllreduce& a) {
            std::vector<tfdist::RingSpan> spans;
            size_t offset = 0;
            for (size_t i = 0; i < span_counts.size(); ++i) {
              const size_t bytes = span_counts[i] * element;
              if (i % 2 == 0) {
                spans.push_back({bytes, outputs[a.rank()].data() + offset,
                                 inputs[a.rank()].data() + offset});
              } else {
                spans.push_back({bytes, in_place[a.rank()].data() + offset, nullptr});
              }
              offset += bytes;
            }
            return a.AllreduceSpans(spans, dtype, ReduceOp::kSum, scale);
          });
      for (int rank = 0; rank < size; ++rank) {
        CHECK_EQ(DescribeStatus(statuses[rank]), std::string("OK"));
        size_t offset = 0;
        for (size_t i = 0; i < span_counts.size(); ++i) {
          const size_t bytes = span_counts[i] * element;
          const Bytes& result = i % 2 == 0 ? outputs[rank] : in_place[rank];
          CHECK_MSG(std::memcmp(result.data() + offset, expected.data() + offset, bytes) == 0,
                    "P=" << size << " dtype " << static_cast<int>(dtype) << " rank " << rank
                         << " span " << i);
          offset += bytes;
        }
      }
    }
  }
}

TFDIST_TEST(SharedMemoryAllreduceSeesPeersOnceTheyHaveStarted) {
  // Threads of one process: once every rank has constructed its object,
  // every peer's process (this one) is visible to every rank.
  std::atomic<int> constructed{0};
  const std::vector<Status> statuses = RunRanks(3, 256, [&](SharedMemoryAllreduce& a) {
    ++constructed;
    while (constructed.load() < a.size()) std::this_thread::yield();
    return a.PeersVisible() ? Status::OK() : Status::Internal("a peer is not visible");
  });
  for (const Status& s : statuses) CHECK_EQ(DescribeStatus(s), std::string("OK"));
}

TFDIST_TEST(SharedMemoryAllreduceFailsWhenAPeerProcessHasEnded) {
  // Rank 1 never comes; its control block names a process that has exited.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  constexpr size_t kSlotBytes = 256;
  FakeSegment segment(2, kSlotBytes);
  SharedMemoryAllreduce rank0(0, segment.regions(), kSlotBytes, false);
  CHECK(!rank0.PeersVisible());  // rank 1 has not written its process id yet
  // Rank 1 as its process left it.
  SharedMemoryAllreduce rank1(1, segment.regions(), kSlotBytes, false, child);
  CHECK(!rank0.PeersVisible());
  std::vector<float> in(100, 1.0f), out(100);
  const auto start = std::chrono::steady_clock::now();
  const Status s = rank0.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32,
                                   ReduceOp::kSum);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(!s.ok());
  CHECK_MSG(s.message().find("rank 1's process ended") != std::string::npos, s.message());
  CHECK_MSG(waited < 10.0, waited);
}

}  // namespace
}  // namespace tfdist_test
