// Hierarchical allreduce against the sequential reference on host layouts
// of every shape the sweep allows: one host, one rank per host, H x L for
// every divisor H of P, hosts of interleaved ranks, and counts 0, 1, < L,
// < P and larger; every reducible dtype and op on a representative set of
// layouts, rendezvous sends on all of them. Also the subgroup view it is
// built on, and its refusal of hosts of unequal size.
#include <string>
#include <vector>

#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/collectives/host_layout.h"
#include "cc/core/transport/in_process_transport.h"
#include "cc/core/transport/subgroup_transport.h"
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
using tfdist::ReduceOp;
using tfdist::Status;
using tfdist::RunOnThreads;
using tfdist::Transport;

// A slow inter-host link, so that cross groups pick bandwidth algorithms for
// large shards and butterfly for small ones: both paths get exercised.
constexpr LinkCost kInterHost = {1e-5, 1e-9, 1e-10};

std::string Describe(const HostLayout& layout) {
  std::string text = "hosts=";
  for (int rank = 0; rank < layout.size(); ++rank) {
    text += std::to_string(layout.host_of(rank));
  }
  return text;
}

void CheckHierarchical(const HostLayout& layout, size_t count, DataType dtype, ReduceOp op,
                       InProcessSendMode mode) {
  const int size = layout.size();
  std::vector<Bytes> buffers;
  for (int rank = 0; rank < size; ++rank) {
    buffers.push_back(MakeRankInput(dtype, op, rank, size, count));
  }
  const Bytes expected = SequentialReduce(buffers, count, dtype, op);
  const std::string label = Describe(layout) + " count=" + std::to_string(count) + " " +
                            tfdist::DataTypeName(dtype) + " " + tfdist::ReduceOpName(op) +
                            " " + SendModeName(mode);
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses = RunOnThreads(fabric, [&](Transport& transport) {
    return tfdist::RunAllreduce(AllreduceAlgorithm::kHierarchical, transport, layout,
                                kInterHost, buffers[transport.rank()].data(), count, dtype,
                                op);
  });
  for (int rank = 0; rank < size; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), label << " rank " << rank);
    CHECK_EQ_MSG(FirstMismatch(buffers[rank], expected, tfdist::DataTypeSize(dtype)), -1LL,
                 label << " rank " << rank << ": first wrong element");
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

TFDIST_TEST(HierarchicalAllreduceRefusesUnequalHosts) {
  const HostLayout uneven = HostLayout::FromHostLabels({0, 0, 1});
  const std::vector<Status> statuses = RunOnThreads(3, [&](Transport& transport) {
    float value = 1.0f;
    return tfdist::HierarchicalAllreduce(transport, uneven, kInterHost, &value, 1,
                                         DataType::kFloat32, ReduceOp::kSum);
  });
  for (const Status& status : statuses) {
    CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
    CHECK(status.message().find("same number of ranks on every host") != std::string::npos);
  }
}

}  // namespace tfdist_test
