// The data-movement collectives and reduce-scatter over every group size of
// the sweep, uneven and empty blocks included, in both send modes.
#include <numeric>
#include <string>
#include <vector>

#include "cc/core/collectives/allgather.h"
#include "cc/core/collectives/alltoall.h"
#include "cc/core/collectives/broadcast.h"
#include "cc/core/collectives/reducescatter.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::InProcessFabric;
using tfdist::InProcessSendMode;
using tfdist::ReduceOp;
using tfdist::Status;
using tfdist::StatusCode;
using tfdist::Transport;

const InProcessSendMode kModes[] = {InProcessSendMode::kBuffered,
                                    InProcessSendMode::kRendezvous};

std::vector<size_t> Offsets(const std::vector<size_t>& sizes) {
  std::vector<size_t> offsets(sizes.size() + 1, 0);
  std::partial_sum(sizes.begin(), sizes.end(), offsets.begin() + 1);
  return offsets;
}

std::string Where(const char* what, int size, InProcessSendMode mode) {
  return std::string(what) + " P=" + std::to_string(size) + " " +
         SendModeName(mode);
}

void CheckAllgatherv(const std::vector<size_t>& bytes_per_rank,
                     InProcessSendMode mode, bool in_place) {
  const int size = static_cast<int>(bytes_per_rank.size());
  const std::vector<size_t> offsets = Offsets(bytes_per_rank);
  Bytes expected;
  for (int rank = 0; rank < size; ++rank) {
    const Bytes block = PatternBlock(rank, 1, bytes_per_rank[rank]);
    expected.insert(expected.end(), block.begin(), block.end());
  }
  std::vector<Bytes> outputs(size, Bytes(offsets[size], 0xEE));
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses =
      RunOnThreads(fabric, [&](Transport& transport) {
        const int rank = transport.rank();
        const Bytes block = PatternBlock(rank, 1, bytes_per_rank[rank]);
        Bytes& output = outputs[rank];
        if (in_place) {
          std::copy(block.begin(), block.end(), output.begin() + offsets[rank]);
          return tfdist::RingAllgatherv(transport, output.data() + offsets[rank],
                                        block.size(), output.data(),
                                        bytes_per_rank);
        }
        return tfdist::RingAllgatherv(transport, block.data(), block.size(),
                                      output.data(), bytes_per_rank);
      });
  const std::string where = Where("allgatherv", size, mode) +
                            (in_place ? " in place" : "");
  for (int rank = 0; rank < size; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"), where);
    CHECK_EQ_MSG(FirstMismatch(outputs[rank], expected, 1), -1LL,
                 where << " rank " << rank << " first wrong byte");
  }
  CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0}, where);
}

}  // namespace

TFDIST_TEST(AllgathervUnequalAndEmptyBlocks) {
  for (InProcessSendMode mode : kModes) {
    for (int size : SweepGroupSizes()) {
      std::vector<size_t> uneven(size), all_empty(size, 0), one_block(size, 0);
      for (int rank = 0; rank < size; ++rank) uneven[rank] = (rank * 5 + 3) % 7;
      one_block[size - 1] = 3 << 20;  // several pipeline segments
      CheckAllgatherv(uneven, mode, /*in_place=*/false);
      CheckAllgatherv(uneven, mode, /*in_place=*/true);
      CheckAllgatherv(all_empty, mode, /*in_place=*/false);
      if (mode == InProcessSendMode::kBuffered || size <= 4) {
        CheckAllgatherv(one_block, mode, /*in_place=*/false);
      }
    }
  }
}

TFDIST_TEST(AllgathervRejectsWrongSizes) {
  const std::vector<Status> statuses =
      tfdist::RunOnThreads(2, [&](Transport& transport) {
        char data[4] = {};
        char out[8] = {};
        return tfdist::RingAllgatherv(transport, data, 3, out, {4, 4});
      });
  for (const Status& status : statuses) {
    CHECK(status.code() == StatusCode::kInvalidArgument);
  }
}

TFDIST_TEST(BroadcastFromEveryRoot) {
  for (InProcessSendMode mode : kModes) {
    for (int size : SweepGroupSizes()) {
      for (int root = 0; root < size; ++root) {
        for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}}) {
          const Bytes expected = PatternBlock(root, 2, bytes);
          std::vector<Bytes> buffers(size, Bytes(bytes, 0));
          buffers[root] = expected;
          InProcessFabric fabric(size, FabricOptions(mode));
          const std::vector<Status> statuses =
              RunOnThreads(fabric, [&](Transport& transport) {
                return tfdist::BinomialBroadcast(
                    transport, buffers[transport.rank()].data(), bytes, root);
              });
          for (int rank = 0; rank < size; ++rank) {
            CHECK_OK(statuses[rank]);
            CHECK_EQ_MSG(FirstMismatch(buffers[rank], expected, 1), -1LL,
                         Where("broadcast", size, mode)
                             << " root " << root << " bytes " << bytes
                             << " rank " << rank);
          }
          CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
        }
      }
    }
  }
}

TFDIST_TEST(BroadcastRootOutOfRangeIsInvalidArgument) {
  for (int root : {-1, 3}) {
    const std::vector<Status> statuses =
        tfdist::RunOnThreads(3, [&](Transport& transport) {
          char data[4] = {};
          return tfdist::BinomialBroadcast(transport, data, sizeof(data), root);
        });
    for (const Status& status : statuses) {
      CHECK(status.code() == StatusCode::kInvalidArgument);
    }
  }
}

TFDIST_TEST(ReducescatterUnevenCounts) {
  for (InProcessSendMode mode : kModes) {
    for (int size : SweepGroupSizes()) {
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<size_t> counts(size);
        for (int rank = 0; rank < size; ++rank) {
          counts[rank] = pattern == 0   ? (rank * 3) % 5           // some empty
                         : pattern == 1 ? (rank == 0 ? 1000 : 0)  // one block
                                        : 0;                      // all empty
        }
        const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
        for (DataType dtype : {DataType::kFloat32, DataType::kInt8,
                               DataType::kBFloat16}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
            const size_t element_size = tfdist::DataTypeSize(dtype);
            std::vector<Bytes> inputs;
            for (int rank = 0; rank < size; ++rank) {
              inputs.push_back(MakeRankInput(dtype, op, rank, size, total));
            }
            const Bytes expected = SequentialReduce(inputs, total, dtype, op);
            std::vector<Bytes> buffers = inputs;
            InProcessFabric fabric(size, FabricOptions(mode));
            const std::vector<Status> statuses =
                RunOnThreads(fabric, [&](Transport& transport) {
                  return tfdist::RingReducescatter(
                      transport, buffers[transport.rank()].data(), counts,
                      dtype, op);
                });
            const std::vector<size_t> offsets = Offsets(counts);
            for (int rank = 0; rank < size; ++rank) {
              CHECK_OK(statuses[rank]);
              const auto begin = offsets[rank] * element_size;
              const auto end = offsets[rank + 1] * element_size;
              const Bytes own(buffers[rank].begin() + begin,
                              buffers[rank].begin() + end);
              const Bytes want(expected.begin() + begin, expected.begin() + end);
              CHECK_EQ_MSG(FirstMismatch(own, want, element_size), -1LL,
                           Where("reducescatter", size, mode)
                               << " pattern " << pattern << " "
                               << tfdist::DataTypeName(dtype) << " "
                               << tfdist::ReduceOpName(op) << " rank " << rank);
            }
            CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
          }
        }
      }
    }
  }
}

TFDIST_TEST(AlltoallvUnevenAndEmptyBlocks) {
  for (InProcessSendMode mode : kModes) {
    for (int size : SweepGroupSizes()) {
      // Bytes from rank s to rank d; zero for some pairs (including self).
      auto block_bytes = [](int from, int to) {
        return static_cast<size_t>(((from + 2 * to) % 4) * 3);
      };
      std::vector<Bytes> outputs(size);
      InProcessFabric fabric(size, FabricOptions(mode));
      const std::vector<Status> statuses =
          RunOnThreads(fabric, [&](Transport& transport) {
            const int rank = transport.rank();
            std::vector<size_t> send_bytes(size), recv_bytes(size);
            Bytes send;
            for (int peer = 0; peer < size; ++peer) {
              send_bytes[peer] = block_bytes(rank, peer);
              recv_bytes[peer] = block_bytes(peer, rank);
              const Bytes block = PatternBlock(rank, peer, send_bytes[peer]);
              send.insert(send.end(), block.begin(), block.end());
            }
            outputs[rank].assign(Offsets(recv_bytes)[size], 0xEE);
            return tfdist::PairwiseAlltoallv(transport, send.data(), send_bytes,
                                             outputs[rank].data(), recv_bytes);
          });
      for (int rank = 0; rank < size; ++rank) {
        CHECK_OK(statuses[rank]);
        Bytes expected;
        for (int peer = 0; peer < size; ++peer) {
          const Bytes block = PatternBlock(peer, rank, block_bytes(peer, rank));
          expected.insert(expected.end(), block.begin(), block.end());
        }
        CHECK_EQ_MSG(FirstMismatch(outputs[rank], expected, 1), -1LL,
                     Where("alltoallv", size, mode) << " rank " << rank);
      }
      CHECK_EQ(fabric.UndeliveredMessageCount(), size_t{0});
    }
  }
}

TFDIST_TEST(AlltoallvRejectsWrongSizeLists) {
  const std::vector<Status> statuses =
      tfdist::RunOnThreads(2, [&](Transport& transport) {
        char data[4] = {};
        return tfdist::PairwiseAlltoallv(transport, data, {2}, data, {2, 2});
      });
  for (const Status& status : statuses) {
    CHECK(status.code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace tfdist_test
