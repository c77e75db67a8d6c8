// Hierarchical allreduce against the sequential reference on host layouts
// of every shape the sweep allows: one host, one rank per host, H x L for
// every divisor H of P, hosts of interleaved ranks, and counts 0, 1, < L,
// < P and larger; every reducible dtype and op on a representative set of
// layouts, rendezvous sends on all of them. The pipeline in forced segment
// counts (more segments than elements too), in place and reading a separate
// input, which must be left untouched; that the pipeline overlaps (a
// segment's cross-host phase can finish only once the next segment's
// reduce-scatter has run). Also the subgroup view it is built on, and its
// refusal of hosts of unequal size. The form over each host's shared memory
// against the same reference: layouts, counts, dtypes, ops, chunks, scales,
// many calls in a row, and a segment that is not the host's.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/transport/host_layout.h"
#include "cc/testing/in_process_transport.h"
#include "cc/core/transport/subgroup_transport.h"
#include "cc/core/tuning/hierarchical_planner.h"
#include "cc/tests/fake_segment.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AllreduceAlgorithm;
using tfdist::DataType;
using tfdist::HostLayout;
using tfdist::InProcessFabric;
using tfdist::InProcessSendMode;
using tfdist::LinkCost;
using tfdist::NetworkCost;
using tfdist::ReduceOp;
using tfdist::Status;
using tfdist::RunOnThreads;
using tfdist::Transport;

// A slow inter-host link, so that cross groups pick bandwidth algorithms for
// large shards and butterfly for small ones: both paths get exercised.
constexpr LinkCost kInterHost = {1e-5, 1e-9, 1e-10};
const NetworkCost kNetwork = tfdist::LinearNetwork({1e-6, 1e-10, 1e-10}, kInterHost);

std::string Describe(const HostLayout& layout) {
  std::string text = "hosts=";
  for (int rank = 0; rank < layout.size(); ++rank) {
    text += std::to_string(layout.host_of(rank));
  }
  return text;
}

// `segments` 0: the cost model's count, in place, through RunAllreduce.
// Otherwise that many segments, out of place when `separate_input`.
void CheckHierarchical(const HostLayout& layout, size_t count, DataType dtype, ReduceOp op,
                       InProcessSendMode mode, int segments = 0, bool separate_input = false) {
  const int size = layout.size();
  std::vector<Bytes> buffers;
  for (int rank = 0; rank < size; ++rank) {
    buffers.push_back(MakeRankInput(dtype, op, rank, size, count));
  }
  const Bytes expected = SequentialReduce(buffers, count, dtype, op);
  const std::string label = Describe(layout) + " count=" + std::to_string(count) + " " +
                            tfdist::DataTypeName(dtype) + " " + tfdist::ReduceOpName(op) +
                            " " + SendModeName(mode) + " segments=" +
                            std::to_string(segments) + (separate_input ? " out of place" : "");
  const std::vector<Bytes> inputs = buffers;
  std::vector<Bytes> outputs(size, Bytes(buffers[0].size(), 0xA5));
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& transport) {
    const int rank = transport.rank();
    if (segments == 0) {
      return tfdist::RunAllreduce(AllreduceAlgorithm::kHierarchical, transport, layout,
                                  tfdist::CostModelPlanner(kNetwork), buffers[rank].data(), count, dtype, op);
    }
    void* output = separate_input ? outputs[rank].data() : buffers[rank].data();
    return tfdist::HierarchicalAllreduce(transport, layout, tfdist::CostModelPlanner(kNetwork), buffers[rank].data(),
                                         output, count, dtype, op, segments);
  });
  for (int rank = 0; rank < size; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), label << " rank " << rank);
    const Bytes& result = separate_input ? outputs[rank] : buffers[rank];
    CHECK_EQ_MSG(FirstMismatch(result, expected, tfdist::DataTypeSize(dtype)), -1LL,
                 label << " rank " << rank << ": first wrong element");
    if (separate_input) {
      CHECK_EQ_MSG(buffers[rank] == inputs[rank], true, label << " rank " << rank << ": input written");
    }
  }
  CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, label << ": stray messages");
}

std::vector<size_t> Counts(int size) {
  return {0, 1, 3, static_cast<size_t>(size - 1), static_cast<size_t>(size + 1), 1000};
}

}  // namespace

TFDIST_TEST(HostLayoutDescribesHosts) {
  const HostLayout consecutive = HostLayout::Consecutive(6, 3);
  CHECK_EQ(consecutive.host_count(), 3);
  CHECK_EQ(consecutive.host_of(3), 1);
  CHECK_EQ(consecutive.local_rank(3), 1);
  CHECK(consecutive.uniform());
  CHECK(consecutive.CrossGroup(1) == (std::vector<int>{1, 3, 5}));
  // Labels are any numbers; hosts are numbered by their first rank.
  const HostLayout interleaved = HostLayout::FromHostLabels({7, 3, 7, 3});
  CHECK_EQ(interleaved.host_of(0), 0);
  CHECK_EQ(interleaved.host_of(1), 1);
  CHECK(interleaved.ranks_of_host(1) == (std::vector<int>{1, 3}));
  CHECK(interleaved.CrossGroup(0) == (std::vector<int>{0, 1}));
  CHECK(!HostLayout::FromHostLabels({0, 0, 1}).uniform());
  CHECK_EQ(HostLayout(4).host_count(), 1);
}

TFDIST_TEST(SubgroupTransportMapsRanks) {
  // Ranks 1 and 3 of four exchange through a two-rank view.
  std::vector<int> received(4, -1);
  const std::vector<Status> statuses = RunOnThreads(4, [&](Transport& transport) {
    if (transport.rank() % 2 == 0) return Status::OK();
    tfdist::SubgroupTransport view(transport, {1, 3});
    const int mine = transport.rank();
    const int peer = 1 - view.rank();
    return view.SendRecv(peer, &mine, sizeof mine, peer, &received[transport.rank()],
                         sizeof(int), 77);
  });
  for (const Status& status : statuses) CHECK_OK(status);
  CHECK_EQ(received[1], 3);
  CHECK_EQ(received[3], 1);
}

TFDIST_TEST(HierarchicalAllreduceAllDtypesOps) {
  const std::vector<HostLayout> layouts = {
      HostLayout(1), HostLayout(3), HostLayout::Consecutive(2, 2),
      HostLayout::Consecutive(4, 2), HostLayout::Consecutive(6, 3),
      HostLayout::Consecutive(6, 2), HostLayout::Consecutive(8, 4),
      HostLayout::FromHostLabels({0, 1, 0, 1, 0, 1})};
  for (const HostLayout& layout : layouts) {
    for (size_t count : Counts(layout.size())) {
      for (DataType dtype : ReducibleDataTypes()) {
        for (ReduceOp op : AllReduceOps()) {
          CheckHierarchical(layout, count, dtype, op, InProcessSendMode::kBuffered);
        }
      }
    }
  }
}

TFDIST_TEST(HierarchicalAllreduceEveryLayoutRendezvous) {
  for (int size : SweepGroupSizes()) {
    for (int hosts = 1; hosts <= size; ++hosts) {
      if (size % hosts != 0) continue;
      for (size_t count : Counts(size)) {
        CheckHierarchical(HostLayout::Consecutive(size, hosts), count, DataType::kFloat32,
                          ReduceOp::kSum, InProcessSendMode::kRendezvous);
      }
    }
  }
  // Several ring segments per shard and large shards across hosts.
  CheckHierarchical(HostLayout::Consecutive(8, 2), 1000003, DataType::kFloat32, ReduceOp::kSum,
                    InProcessSendMode::kBuffered);
  CheckHierarchical(HostLayout::Consecutive(6, 3), 1000003, DataType::kInt32, ReduceOp::kMax,
                    InProcessSendMode::kRendezvous);
}

TFDIST_TEST(HierarchicalAllreducePipelinedSegments) {
  // Segment counts that divide the buffer, that do not, and that exceed the
  // element count; in place and out of place; buffered and rendezvous.
  const std::vector<HostLayout> layouts = {
      HostLayout::Consecutive(4, 2), HostLayout::Consecutive(6, 3),
      HostLayout::Consecutive(6, 2), HostLayout::Consecutive(8, 2),
      HostLayout::Consecutive(3, 3), HostLayout::Consecutive(3, 1),
      HostLayout::FromHostLabels({0, 1, 0, 1})};
  for (const HostLayout& layout : layouts) {
    for (size_t count : {size_t{1}, size_t{5}, size_t{1000}, size_t{70001}}) {
      for (int segments : {1, 2, 3, 8}) {
        for (bool separate_input : {false, true}) {
          CheckHierarchical(layout, count, DataType::kFloat32, ReduceOp::kSum,
                            InProcessSendMode::kRendezvous, segments, separate_input);
        }
      }
    }
  }
  for (DataType dtype : ReducibleDataTypes()) {
    for (ReduceOp op : AllReduceOps()) {
      CheckHierarchical(HostLayout::Consecutive(4, 2), 1001, dtype, op,
                        InProcessSendMode::kBuffered, 4, true);
      CheckHierarchical(HostLayout::Consecutive(6, 3), 37, dtype, op,
                        InProcessSendMode::kRendezvous, 3, false);
    }
  }
}

namespace {

// Holds every cross-host receive of a rank until that rank has finished
// `intra_needed` receives within its host. Run in order, the phases of
// segment 0 (reduce-scatter, cross-host, allgather) wait for the
// reduce-scatter of segment 1, which comes after them: a deadlock that the
// hold's deadline turns into an error. Pipelined, segment 1's
// reduce-scatter runs while segment 0 crosses hosts.
class HoldCrossHost : public Transport {
 public:
  HoldCrossHost(Transport& inner, const HostLayout& layout, int intra_needed)
      : inner_(inner), layout_(layout), intra_needed_(intra_needed) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  bool AllowsConcurrentCalls() const override { return inner_.AllowsConcurrentCalls(); }
  std::unique_ptr<tfdist::PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                               int tag) override {
    return inner_.StartSend(peer, data, bytes, tag);
  }
  std::unique_ptr<tfdist::PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                               int tag) override {
    return std::make_unique<Op>(*this, inner_.StartRecv(peer, data, bytes, tag),
                                !layout_.same_host(rank(), peer));
  }

 private:
  class Op : public tfdist::PendingOp {
   public:
    Op(HoldCrossHost& owner, std::unique_ptr<tfdist::PendingOp> inner, bool cross)
        : owner_(owner), inner_(std::move(inner)), cross_(cross) {}
    ~Op() override { Wait(); }
    Status Wait() override {
      if (done_) return status_;
      done_ = true;
      if (cross_) {
        std::unique_lock<std::mutex> lock(owner_.mutex_);
        if (!owner_.intra_done_cv_.wait_for(lock, std::chrono::seconds(5), [&] {
              return owner_.intra_done_ >= owner_.intra_needed_;
            })) {
          lock.unlock();
          inner_->Wait();  // the buffer must not outlive its receive
          status_ = Status::Internal("a cross-host receive waited for the next segment's "
                                     "reduce-scatter, which never came: no overlap");
          return status_;
        }
      }
      status_ = inner_->Wait();
      if (!cross_) {
        std::lock_guard<std::mutex> lock(owner_.mutex_);
        ++owner_.intra_done_;
        owner_.intra_done_cv_.notify_all();
      }
      return status_;
    }

   private:
    HoldCrossHost& owner_;
    std::unique_ptr<tfdist::PendingOp> inner_;
    const bool cross_;
    bool done_ = false;
    Status status_;
  };

  Transport& inner_;
  const HostLayout& layout_;
  const int intra_needed_;
  std::mutex mutex_;
  std::condition_variable intra_done_cv_;
  int intra_done_ = 0;  // guarded by mutex_
};

}  // namespace

TFDIST_TEST(HierarchicalAllreduceOverlapsCrossHostWithTheNextSegment) {
  // Shapes (H hosts of k), segment counts from 2 to many, counts that the
  // segments and shards do not divide; every segment fits in one ring
  // message, so a segment's reduce-scatter is k - 1 receives per rank and
  // the first cross-host receive may complete after 2 (k - 1) of them.
  const std::vector<HostLayout> layouts = {
      HostLayout::Consecutive(4, 2), HostLayout::Consecutive(8, 4),
      HostLayout::Consecutive(8, 2), HostLayout::Consecutive(6, 2),
      HostLayout::Consecutive(6, 3), HostLayout::FromHostLabels({0, 1, 0, 1, 0, 1})};
  for (const HostLayout& layout : layouts) {
    const int size = layout.size();
    const int intra_needed = 2 * (layout.ranks_per_host() - 1);
    for (size_t count : {size_t{1001}, size_t{4099}}) {
      for (int segments : {2, 3, 7, 16}) {
        std::vector<Bytes> buffers;
        for (int rank = 0; rank < size; ++rank) {
          buffers.push_back(MakeRankInput(DataType::kFloat32, ReduceOp::kSum, rank, size, count));
        }
        const Bytes expected = SequentialReduce(buffers, count, DataType::kFloat32, ReduceOp::kSum);
        const std::string label = Describe(layout) + " count=" + std::to_string(count) +
                                  " segments=" + std::to_string(segments);
        InProcessFabric fabric(size, FabricOptions(InProcessSendMode::kRendezvous));
        const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& inner) {
          HoldCrossHost transport(inner, layout, intra_needed);
          return tfdist::HierarchicalAllreduce(transport, layout, tfdist::CostModelPlanner(kNetwork),
                                               buffers[inner.rank()].data(),
                                               buffers[inner.rank()].data(), count,
                                               DataType::kFloat32, ReduceOp::kSum, segments);
        });
        for (int rank = 0; rank < size; ++rank) {
          CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"),
                       label << " rank " << rank);
          CHECK_EQ_MSG(FirstMismatch(buffers[rank], expected, 4), -1LL,
                       label << " rank " << rank);
        }
        CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, label);
      }
    }
  }
}

TFDIST_TEST(HierarchicalSegmentsFromTheCostModel) {
  const HostLayout two_by_two = HostLayout::Consecutive(4, 2);
  const NetworkCost network = tfdist::LinearNetwork({1e-6, 2e-10, 2e-10}, {50e-6, 8e-10, 0.0});
  // Small messages are not cut; large ones are, within the bounds.
  CHECK_EQ(tfdist::HierarchicalSegments(two_by_two, 4096, network), 1);
  const int large = tfdist::HierarchicalSegments(two_by_two, size_t{64} << 20, network);
  CHECK(large > 1 && large <= 64);
  // Nothing to overlap: one host, or one rank per host.
  CHECK_EQ(tfdist::HierarchicalSegments(HostLayout(4), size_t{64} << 20, network), 1);
  CHECK_EQ(tfdist::HierarchicalSegments(HostLayout::Consecutive(4, 4), size_t{64} << 20,
                                        network), 1);
  // The pipelined prediction hides the faster stream: below the sum of the
  // phases run one after another, above the slower of them alone.
  const double pipelined = tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kHierarchical,
                                                           two_by_two, size_t{64} << 20, network);
  // The cross-host phase alone: the best flat algorithm for one rank per
  // host on the whole 32 MiB shard.
  double cross_alone = 1e9;
  for (AllreduceAlgorithm flat : {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
                                  AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner}) {
    cross_alone = std::min(cross_alone,
                           tfdist::PredictAllreduceSeconds(flat, HostLayout::Consecutive(2, 2),
                                                           size_t{32} << 20, network));
  }
  CHECK(pipelined > cross_alone * 0.99);
  CHECK(pipelined < cross_alone * 1.5);
}

TFDIST_TEST(HierarchicalAllreduceRefusesUnequalHosts) {
  const HostLayout uneven = HostLayout::FromHostLabels({0, 0, 1});
  const std::vector<Status> statuses = RunOnThreads(3, [&](Transport& transport) {
    float value = 1.0f;
    return tfdist::HierarchicalAllreduce(transport, uneven, tfdist::CostModelPlanner(kNetwork), &value, 1,
                                         DataType::kFloat32, ReduceOp::kSum);
  });
  for (const Status& status : statuses) {
    CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
    CHECK(status.message().find("same number of ranks on every host") != std::string::npos);
  }
}

}  // namespace tfdist_test

// ---- Hierarchical over each host's shared memory ----

namespace tfdist_test {
namespace {

// One call (or `calls` calls in a row, each on inputs shifted by the call's
// index) of HierarchicalAllreduceOverSharedMemory on every rank, each host's
// ranks on a fake segment of their own with slots of `slot_bytes`, against
// the sequential reference scaled by `scale`.
void CheckOverSharedMemory(const HostLayout& layout, size_t count, DataType dtype, ReduceOp op,
                           InProcessSendMode mode, size_t slot_bytes, int segments,
                           bool separate_input, double scale = 1.0, int calls = 1) {
  const int size = layout.size();
  const std::string label = Describe(layout) + " count=" + std::to_string(count) + " " +
                            tfdist::DataTypeName(dtype) + " " + tfdist::ReduceOpName(op) + " " +
                            SendModeName(mode) + " slot=" + std::to_string(slot_bytes) +
                            " segments=" + std::to_string(segments) +
                            (separate_input ? " out of place" : "") +
                            " scale=" + std::to_string(scale);
  std::vector<std::unique_ptr<FakeSegment>> host_segments;
  for (int host = 0; host < layout.host_count(); ++host) {
    host_segments.push_back(std::make_unique<FakeSegment>(layout.ranks_per_host(), slot_bytes));
  }
  auto input_of = [&](int rank, int call) {
    return MakeRankInput(dtype, op, (rank + call) % size, size, count);
  };
  std::vector<std::vector<Bytes>> results(size, std::vector<Bytes>(calls));
  std::vector<std::vector<Bytes>> inputs(size, std::vector<Bytes>(calls));
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& transport) {
    const int rank = transport.rank();
    const int host = layout.host_of(rank);
    tfdist::SharedMemoryAllreduce host_memory(layout.local_rank(rank),
                                              host_segments[host]->regions(), slot_bytes,
                                              /*oversubscribed=*/true);
    for (int call = 0; call < calls; ++call) {
      inputs[rank][call] = input_of(rank, call);
      Bytes& result = results[rank][call];
      result = separate_input ? Bytes(inputs[rank][call].size(), 0xA5) : inputs[rank][call];
      TFDIST_RETURN_IF_ERROR(tfdist::HierarchicalAllreduceOverSharedMemory(
          host_memory, transport, layout, tfdist::CostModelPlanner(kNetwork),
          separate_input ? inputs[rank][call].data() : result.data(), result.data(), count,
          dtype, op, scale, segments));
    }
    return Status::OK();
  });
  for (int call = 0; call < calls; ++call) {
    std::vector<Bytes> call_inputs;
    for (int rank = 0; rank < size; ++rank) call_inputs.push_back(input_of(rank, call));
    Bytes expected = SequentialReduce(call_inputs, count, dtype, op);
    if (scale != 1.0) {
      tfdist::ConvertScaled(expected.data(), dtype, expected.data(), dtype, count, scale);
    }
    for (int rank = 0; rank < size; ++rank) {
      const std::string where = label + " call " + std::to_string(call) + " rank " +
                                std::to_string(rank);
      CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), where);
      if (!statuses[rank].ok()) continue;
      CHECK_EQ_MSG(FirstMismatch(results[rank][call], expected, tfdist::DataTypeSize(dtype)),
                   -1LL, where << ": first wrong element");
      if (separate_input) {
        CHECK_EQ_MSG(inputs[rank][call] == input_of(rank, call), true, where << ": input written");
      }
    }
  }
  CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, label << ": stray messages");
}

}  // namespace

TFDIST_TEST(HierarchicalOverSharedMemoryMatchesReference) {
  // Slots of 256 bytes: a few hundred elements take many chunks, so chunk
  // c's phase across hosts overlaps chunk c + 1's; counts below the host's
  // rank count leave parts empty; hosts of one rank copy their input.
  const std::vector<HostLayout> layouts = {
      HostLayout::Consecutive(4, 2), HostLayout::Consecutive(6, 3),
      HostLayout::Consecutive(6, 2), HostLayout::Consecutive(8, 2),
      HostLayout::Consecutive(3, 3), HostLayout::FromHostLabels({0, 1, 0, 1})};
  for (const HostLayout& layout : layouts) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{64}, size_t{65}, size_t{1000}}) {
      for (int segments : {0, 1, 3, 1000}) {
        CheckOverSharedMemory(layout, count, DataType::kFloat32, ReduceOp::kSum,
                              InProcessSendMode::kRendezvous, 256, segments,
                              /*separate_input=*/segments % 2 == 1);
      }
    }
  }
  for (DataType dtype : ReducibleDataTypes()) {
    for (ReduceOp op : AllReduceOps()) {
      CheckOverSharedMemory(HostLayout::Consecutive(4, 2), 1001, dtype, op,
                            InProcessSendMode::kBuffered, 512, 0, true);
      CheckOverSharedMemory(HostLayout::Consecutive(6, 3), 37, dtype, op,
                            InProcessSendMode::kRendezvous, 64, 5, false);
    }
  }
  // Large parts across hosts (the bandwidth algorithms) in the default slot.
  CheckOverSharedMemory(HostLayout::Consecutive(4, 2), 1000003, DataType::kFloat32,
                        ReduceOp::kSum, InProcessSendMode::kRendezvous, size_t{1} << 20, 0,
                        false);
}

TFDIST_TEST(HierarchicalOverSharedMemoryScalesWhileCopyingOut) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kInt32}) {
    CheckOverSharedMemory(HostLayout::Consecutive(4, 2), 999, dtype, ReduceOp::kSum,
                          InProcessSendMode::kBuffered, 256, 0, true, 0.25);
    CheckOverSharedMemory(HostLayout::Consecutive(6, 2), 999, dtype, ReduceOp::kSum,
                          InProcessSendMode::kRendezvous, 256, 4, false, 0.1);
  }
}

// The spans form (the executor's WhereTheyLie: a group's large tensors where
// they lie, some read from an input of their own, and its packed small ones)
// reduces the spans' concatenation as one buffer: against the reference over
// it, with spans of uneven sizes, an empty one, and spans that start and end
// inside chunks (slots of 256 bytes).
TFDIST_TEST(HierarchicalSpansOverSharedMemoryMatchReference) {
  const std::vector<size_t> span_counts = {5, 0, 130, 1, 77, 64};
  size_t total = 0;
  for (size_t n : span_counts) total += n;
  for (const HostLayout& layout : {HostLayout::Consecutive(4, 2), HostLayout::Consecutive(6, 3),
                                   HostLayout::FromHostLabels({0, 1, 0, 1})}) {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
      for (int segments : {0, 3}) {
        const int size = layout.size();
        const size_t element = tfdist::DataTypeSize(dtype);
        const double scale = dtype == DataType::kInt32 ? 1.0 : 0.5;
        const std::string label = Describe(layout) + " " + tfdist::DataTypeName(dtype) +
                                  " segments=" + std::to_string(segments);
        std::vector<std::unique_ptr<FakeSegment>> host_segments;
        for (int host = 0; host < layout.host_count(); ++host) {
          host_segments.push_back(std::make_unique<FakeSegment>(layout.ranks_per_host(), 256));
        }
        std::vector<Bytes> inputs(size), results(size);
        InProcessFabric fabric(size, FabricOptions(InProcessSendMode::kRendezvous));
        const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& transport) {
          const int rank = transport.rank();
          inputs[rank] = MakeRankInput(dtype, ReduceOp::kSum, rank, size, total);
          // Odd spans read from the input and write elsewhere; even ones are in place.
          Bytes out_of_place(total * element, 0xA5);
          results[rank] = inputs[rank];
          std::vector<tfdist::RingSpan> spans;
          size_t offset = 0;
          for (size_t i = 0; i < span_counts.size(); ++i) {
            const size_t bytes = span_counts[i] * element;
            if (i % 2 == 1) {
              spans.push_back({bytes, out_of_place.data() + offset, inputs[rank].data() + offset});
            } else {
              spans.push_back({bytes, results[rank].data() + offset, nullptr});
            }
            offset += bytes;
          }
          tfdist::SharedMemoryAllreduce host_memory(
              layout.local_rank(rank), host_segments[layout.host_of(rank)]->regions(), 256,
              /*oversubscribed=*/true);
          TFDIST_RETURN_IF_ERROR(tfdist::HierarchicalAllreduceSpansOverSharedMemory(
              host_memory, transport, layout, tfdist::CostModelPlanner(kNetwork), spans, dtype,
              ReduceOp::kSum, scale, segments));
          offset = 0;
          for (size_t i = 0; i < span_counts.size(); ++i) {
            const size_t bytes = span_counts[i] * element;
            if (i % 2 == 1) {
              std::copy(out_of_place.begin() + offset, out_of_place.begin() + offset + bytes,
                        results[rank].begin() + offset);
            }
            offset += bytes;
          }
          return Status::OK();
        });
        std::vector<Bytes> reference_inputs;
        for (int rank = 0; rank < size; ++rank) {
          reference_inputs.push_back(MakeRankInput(dtype, ReduceOp::kSum, rank, size, total));
        }
        Bytes expected = SequentialReduce(reference_inputs, total, dtype, ReduceOp::kSum);
        if (scale != 1.0) {
          tfdist::ConvertScaled(expected.data(), dtype, expected.data(), dtype, total, scale);
        }
        for (int rank = 0; rank < size; ++rank) {
          const std::string where = label + " rank " + std::to_string(rank);
          CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), where);
          if (!statuses[rank].ok()) continue;
          CHECK_EQ_MSG(FirstMismatch(results[rank], expected, element), -1LL,
                       where << ": first wrong element");
          CHECK_EQ_MSG(inputs[rank] == reference_inputs[rank], true, where << ": input written");
        }
        CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, label << ": stray messages");
      }
    }
  }
}

TFDIST_TEST(HierarchicalOverSharedMemoryKeepsStepAcrossCalls) {
  // Many calls in a row on the same segments, of sizes that end on either
  // slot: a rank that runs ahead into the next call must not refill a slot
  // a peer of its host still copies out.
  for (size_t count : {size_t{7}, size_t{100}, size_t{129}}) {
    CheckOverSharedMemory(HostLayout::Consecutive(6, 2), count, DataType::kInt32,
                          ReduceOp::kSum, InProcessSendMode::kRendezvous, 128, 0, true, 1.0,
                          25);
  }
}

TFDIST_TEST(HierarchicalOverSharedMemoryRefusesAnotherHostsSegment) {
  // A segment of the wrong size for the host, and one host only: named.
  const HostLayout two_by_two = HostLayout::Consecutive(4, 2);
  FakeSegment four(4, 256);
  const std::vector<Status> statuses = RunOnThreads(4, [&](Transport& transport) {
    FakeSegment three(3, 256);
    tfdist::SharedMemoryAllreduce wrong_size(0, three.regions(), 256, true, 1);
    float value = 1.0f;
    return tfdist::HierarchicalAllreduceOverSharedMemory(
        wrong_size, transport, two_by_two, tfdist::CostModelPlanner(kNetwork), &value, &value,
        1, DataType::kFloat32, ReduceOp::kSum, 1.0);
  });
  for (const Status& status : statuses) {
    CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
    CHECK(status.message().find("is not this rank's host") != std::string::npos);
  }
  const std::vector<Status> one_host = RunOnThreads(4, [&](Transport& transport) {
    tfdist::SharedMemoryAllreduce whole(transport.rank(), four.regions(), 256, true, 1);
    float value = 1.0f;
    return tfdist::HierarchicalAllreduceOverSharedMemory(
        whole, transport, HostLayout(4), tfdist::CostModelPlanner(kNetwork), &value, &value, 1,
        DataType::kFloat32, ReduceOp::kSum, 1.0);
  });
  for (const Status& status : one_host) {
    CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
  }
}

}  // namespace tfdist_test
