// Every allreduce algorithm against a sequential reference: all group sizes
// of the sweep, counts 0, 1, 7, P-1, P+1, 1000 (and 1000003 for a
// representative subset), every reducible dtype and every op, bit-exact.
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/ring_allreduce.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/half.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_data.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AllreduceAlgorithm;
using tfdist::DataType;
using tfdist::InProcessFabric;
using tfdist::InProcessSendMode;
using tfdist::ReduceOp;
using tfdist::Status;
using tfdist::Transport;

const std::vector<AllreduceAlgorithm>& TransportAlgorithms() {
  static const std::vector<AllreduceAlgorithm> algorithms = {
      AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
      AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner};
  return algorithms;
}

std::vector<size_t> SmallCounts(int size) {
  const std::set<size_t> counts = {0, 1, 7, static_cast<size_t>(size - 1),
                                   static_cast<size_t>(size + 1), 1000};
  return {counts.begin(), counts.end()};
}

// Runs `run` (an allreduce of `count` elements) on P threads from the given
// inputs and checks every rank's result against `expected`.
using AllreduceRunner = std::function<Status(Transport&, void*, size_t)>;

void CheckRun(const std::string& label, const AllreduceRunner& run,
              const std::vector<Bytes>& inputs, const Bytes& expected,
              size_t count, DataType dtype, InProcessSendMode mode) {
  const int size = static_cast<int>(inputs.size());
  std::vector<Bytes> buffers = inputs;
  InProcessFabric fabric(size, FabricOptions(mode));
  const std::vector<Status> statuses =
      RunOnThreads(fabric, [&](Transport& transport) {
        return run(transport, buffers[transport.rank()].data(), count);
      });
  for (int rank = 0; rank < size; ++rank) {
    CHECK_EQ_MSG(DescribeStatus(statuses[rank]), std::string("OK"),
                 label << " rank " << rank);
    const long long mismatch =
        FirstMismatch(buffers[rank], expected, tfdist::DataTypeSize(dtype));
    CHECK_EQ_MSG(mismatch, -1LL,
                 label << " rank " << rank << ": first wrong element");
  }
  CHECK_EQ_MSG(fabric.UndeliveredMessageCount(), size_t{0},
               label << ": stray messages");
}

std::string Label(AllreduceAlgorithm algorithm, int size, size_t count,
                  DataType dtype, ReduceOp op, InProcessSendMode mode) {
  return std::string(tfdist::AllreduceAlgorithmName(algorithm)) +
         " P=" + std::to_string(size) + " count=" + std::to_string(count) +
         " " + tfdist::DataTypeName(dtype) + " " + tfdist::ReduceOpName(op) +
         " " + SendModeName(mode);
}

// Where an allreduce reads and writes: in place (the buffer starts as the
// input), or out of place (what the runtime does with TensorFlow's input and
// output tensors): the output starts as garbage and the input, elsewhere,
// must come out unchanged.
enum class Placement { kInPlace, kOutOfPlace };

// The transport algorithms and hierarchical (on one host), which every
// placement test covers.
const std::vector<AllreduceAlgorithm>& EveryAlgorithm() {
  static const std::vector<AllreduceAlgorithm> algorithms = {
      AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRing,
      AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kHierarchical};
  return algorithms;
}

// Checks `algorithms` on one (P, count, dtype, op), sharing the inputs.
void CheckAllreduce(const std::vector<AllreduceAlgorithm>& algorithms, int size,
                    size_t count, DataType dtype, ReduceOp op,
                    InProcessSendMode mode, Placement placement = Placement::kInPlace) {
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < size; ++rank) {
    inputs.push_back(MakeRankInput(dtype, op, rank, size, count));
  }
  const Bytes expected = SequentialReduce(inputs, count, dtype, op);
  for (AllreduceAlgorithm algorithm : algorithms) {
    if (placement == Placement::kInPlace) {
      auto run = [&](Transport& transport, void* buffer, size_t n) {
        return tfdist::RunAllreduce(algorithm, transport, buffer, n, dtype, op);
      };
      CheckRun(Label(algorithm, size, count, dtype, op, mode), run, inputs,
               expected, count, dtype, mode);
      continue;
    }
    std::vector<Bytes> kept = inputs;
    auto run = [&](Transport& transport, void* output, size_t n) {
      const size_t bytes = n * tfdist::DataTypeSize(dtype);
      if (bytes > 0) std::memset(output, 0xAB, bytes);
      return tfdist::RunAllreduce(algorithm, transport, kept[transport.rank()].data(), output,
                                  n, dtype, op);
    };
    const std::string label = Label(algorithm, size, count, dtype, op, mode) + " out of place";
    CheckRun(label, run, inputs, expected, count, dtype, mode);
    for (int rank = 0; rank < size; ++rank) {
      CHECK_EQ_MSG(FirstMismatch(kept[rank], inputs[rank], tfdist::DataTypeSize(dtype)), -1LL,
                   label << ": input of rank " << rank << " was modified");
    }
  }
}

void SweepSmallCounts(AllreduceAlgorithm algorithm) {
  for (Placement placement : {Placement::kInPlace, Placement::kOutOfPlace}) {
    for (int size : SweepGroupSizes()) {
      for (size_t count : SmallCounts(size)) {
        for (DataType dtype : ReducibleDataTypes()) {
          for (ReduceOp op : AllReduceOps()) {
            CheckAllreduce({algorithm}, size, count, dtype, op,
                           InProcessSendMode::kBuffered, placement);
          }
        }
      }
    }
  }
}

}  // namespace

TFDIST_TEST(TreeAllreduceAllSizesDtypesOps) {
  SweepSmallCounts(AllreduceAlgorithm::kTree);
}

TFDIST_TEST(ButterflyAllreduceAllSizesDtypesOps) {
  SweepSmallCounts(AllreduceAlgorithm::kButterfly);
}

TFDIST_TEST(RingAllreduceAllSizesDtypesOps) {
  SweepSmallCounts(AllreduceAlgorithm::kRing);
}

TFDIST_TEST(RabenseifnerAllreduceAllSizesDtypesOps) {
  SweepSmallCounts(AllreduceAlgorithm::kRabenseifner);
}

// One million and three elements (4 MB of float32: several ring segments
// per chunk at small P) for every algorithm and every P.
TFDIST_TEST(AllreduceLargeCount) {
  constexpr size_t kLargeCount = LargeTestCount(1000003);
  const std::pair<DataType, ReduceOp> kCombinations[] = {
      {DataType::kFloat32, ReduceOp::kSum},
      {DataType::kInt32, ReduceOp::kSum},
      {DataType::kInt32, ReduceOp::kMax}};
  for (int size : SweepGroupSizes()) {
    for (const auto& combination : kCombinations) {
      CheckAllreduce(TransportAlgorithms(), size, kLargeCount,
                     combination.first, combination.second,
                     InProcessSendMode::kBuffered);
    }
  }
}

// With rendezvous sends (MPI's large-message behaviour) a schedule that
// relies on buffering deadlocks and a send buffer written too early corrupts
// the result; out of place, a step that sends from the wrong one of input
// and output sends garbage.
TFDIST_TEST(AllreduceWithRendezvousSends) {
  for (Placement placement : {Placement::kInPlace, Placement::kOutOfPlace}) {
    for (int size : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7},
                           static_cast<size_t>(size + 1), size_t{1000}}) {
        CheckAllreduce(EveryAlgorithm(), size, count, DataType::kFloat32,
                       ReduceOp::kSum, InProcessSendMode::kRendezvous, placement);
        CheckAllreduce(EveryAlgorithm(), size, count, DataType::kInt8,
                       ReduceOp::kMax, InProcessSendMode::kRendezvous, placement);
      }
    }
  }
}

// Hierarchical (one host) in and out of place for every dtype and op; the
// other algorithms' sweeps above run both placements already.
TFDIST_TEST(HierarchicalAllreduceOneHostBothPlacements) {
  for (Placement placement : {Placement::kInPlace, Placement::kOutOfPlace}) {
    for (int size : {1, 2, 3, 4, 6}) {
      for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(size + 1), size_t{1000}}) {
        for (DataType dtype : ReducibleDataTypes()) {
          for (ReduceOp op : AllReduceOps()) {
            CheckAllreduce({AllreduceAlgorithm::kHierarchical}, size, count, dtype, op,
                           InProcessSendMode::kBuffered, placement);
          }
        }
      }
    }
  }
}

// Out of place on a large vector (several ring segments, cache-sized blocks
// of the out-of-place reduction): every algorithm, P = 2, 3, 4, 5, 8.
TFDIST_TEST(AllreduceLargeCountOutOfPlace) {
  constexpr size_t kLargeCount = LargeTestCount(300007);
  for (int size : {2, 3, 4, 5, 8}) {
    CheckAllreduce(EveryAlgorithm(), size, kLargeCount, DataType::kFloat32, ReduceOp::kSum,
                   InProcessSendMode::kBuffered, Placement::kOutOfPlace);
    CheckAllreduce(EveryAlgorithm(), size, kLargeCount, DataType::kFloat16, ReduceOp::kMax,
                   InProcessSendMode::kRendezvous, Placement::kOutOfPlace);
  }
}

// Tiny segments give many segments per chunk without big buffers, which
// exercises the two-slot pipeline, forwarding across steps and uneven last
// segments. Segment bounds below one element round up to one element.
TFDIST_TEST(RingAllreduceManySegments) {
  for (InProcessSendMode mode :
       {InProcessSendMode::kBuffered, InProcessSendMode::kRendezvous}) {
    for (int size : {2, 3, 5, 8}) {
      for (size_t count : {size_t{1}, size_t{7}, static_cast<size_t>(size + 1),
                           size_t{1000}}) {
        for (DataType dtype :
             {DataType::kFloat32, DataType::kInt64, DataType::kFloat16}) {
          for (size_t segment_bytes : {size_t{1}, size_t{12}, size_t{64}}) {
            std::vector<Bytes> inputs;
            for (int rank = 0; rank < size; ++rank) {
              inputs.push_back(
                  MakeRankInput(dtype, ReduceOp::kSum, rank, size, count));
            }
            const Bytes expected =
                SequentialReduce(inputs, count, dtype, ReduceOp::kSum);
            auto run = [&](Transport& transport, void* buffer, size_t n) {
              return tfdist::RingAllreduceWithSegments(
                  transport, buffer, n, dtype, ReduceOp::kSum, segment_bytes);
            };
            CheckRun(Label(AllreduceAlgorithm::kRing, size, count, dtype,
                           ReduceOp::kSum, mode) +
                         " segment=" + std::to_string(segment_bytes),
                     run, inputs, expected, count, dtype, mode);
          }
        }
      }
    }
  }
}

// The ring over one buffer as a span: out of place from `input`, or in place
// when `input` is the buffer itself (what the executor hands RingAllreduceSpans).
Status RingOverOneSpan(Transport& transport, const void* input, void* buffer, size_t count,
                       DataType dtype, double scale = 1.0) {
  const tfdist::RingSpan span{count * tfdist::DataTypeSize(dtype),
                              static_cast<unsigned char*>(buffer),
                              input == buffer ? nullptr
                                              : static_cast<const unsigned char*>(input)};
  return tfdist::RingAllreduceSpans(transport, {span}, dtype, ReduceOp::kSum, scale);
}

// Out of place: the output starts as garbage and the input must stay as it was.
TFDIST_TEST(RingAllreduceOutOfPlace) {
  for (int size : {1, 2, 3, 4, 7}) {
    for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(size + 1), size_t{1000},
                         LargeTestCount(700001)}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
        std::vector<Bytes> inputs;
        for (int rank = 0; rank < size; ++rank) {
          inputs.push_back(MakeRankInput(dtype, ReduceOp::kSum, rank, size, count));
        }
        const Bytes expected = SequentialReduce(inputs, count, dtype, ReduceOp::kSum);
        std::vector<Bytes> kept = inputs;
        auto run = [&](Transport& transport, void* buffer, size_t n) {
          const size_t bytes = n * tfdist::DataTypeSize(dtype);
          if (bytes > 0) std::memset(buffer, 0xAB, bytes);
          return RingOverOneSpan(transport, kept[transport.rank()].data(), buffer, n, dtype);
        };
        CheckRun(Label(AllreduceAlgorithm::kRing, size, count, dtype, ReduceOp::kSum,
                       InProcessSendMode::kRendezvous) + " out of place",
                 run, inputs, expected, count, dtype, InProcessSendMode::kRendezvous);
        for (int rank = 0; rank < size; ++rank) {
          CHECK_EQ_MSG(FirstMismatch(kept[rank], inputs[rank], tfdist::DataTypeSize(dtype)),
                       -1LL, "input of rank " << rank << " was modified");
        }
      }
    }
  }
}

// Every rank's input for a Sum of `count` elements.
std::vector<Bytes> SumInputs(int size, size_t count, DataType dtype) {
  std::vector<Bytes> inputs;
  for (int rank = 0; rank < size; ++rank) {
    inputs.push_back(MakeRankInput(dtype, ReduceOp::kSum, rank, size, count));
  }
  return inputs;
}

// Their sequential sum times `scale`, rounded as the ring rounds it.
Bytes ScaledSum(const std::vector<Bytes>& inputs, size_t count, DataType dtype, double scale) {
  Bytes expected = SequentialReduce(inputs, count, dtype, ReduceOp::kSum);
  tfdist::ConvertScaled(expected.data(), dtype, expected.data(), dtype, count, scale);
  return expected;
}

// The ring scales each reduced chunk once, at the rank that reduced it; the
// result must be exactly the sequential sum scaled the same way, in place
// and out of place, for floats and for integers (rounded).
TFDIST_TEST(RingAllreduceAppliesResultScale) {
  for (int size : {1, 2, 3, 5}) {
    const double scale = 1.0 / size;
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, LargeTestCount(300001)}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat64}) {
        for (bool in_place : {false, true}) {
          const std::vector<Bytes> inputs = SumInputs(size, count, dtype);
          const Bytes expected = ScaledSum(inputs, count, dtype, scale);
          std::vector<Bytes> kept = inputs;
          auto run = [&](Transport& transport, void* buffer, size_t n) {
            const void* input = in_place ? buffer : kept[transport.rank()].data();
            const size_t bytes = n * tfdist::DataTypeSize(dtype);
            if (!in_place && bytes > 0) std::memset(buffer, 0xAB, bytes);
            return RingOverOneSpan(transport, input, buffer, n, dtype, scale);
          };
          CheckRun(Label(AllreduceAlgorithm::kRing, size, count, dtype, ReduceOp::kSum,
                         InProcessSendMode::kBuffered) +
                       (in_place ? " scaled in place" : " scaled out of place"),
                   run, inputs, expected, count, dtype, InProcessSendMode::kBuffered);
        }
      }
    }
  }
}

// Several buffers as one vector: spans of every size (empty, one element,
// ones that cross chunk and segment boundaries), alternately in place and
// out of place; the result equals one allreduce of the concatenation.
TFDIST_TEST(RingAllreduceOverSpans) {
  for (int size : {1, 2, 3, 4}) {
    for (size_t count : {size_t{0}, size_t{5}, size_t{1000}, LargeTestCount(300001)}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kInt64}) {
        for (size_t segment_bytes : {size_t{12}, tfdist::kDefaultRingSegmentBytes}) {
          const double scale = dtype == DataType::kFloat32 ? 0.5 : 1.0;
          const std::vector<Bytes> inputs = SumInputs(size, count, dtype);
          const Bytes expected = ScaledSum(inputs, count, dtype, scale);
          std::vector<Bytes> kept = inputs;
          auto run = [&](Transport& transport, void* buffer, size_t n) {
            const size_t element = tfdist::DataTypeSize(dtype);
            auto* out = static_cast<unsigned char*>(buffer);
            const unsigned char* in = kept[transport.rank()].data();
            std::vector<tfdist::RingSpan> spans;
            const size_t cuts[] = {0, 1, 0, 3, n / 3, 0};
            size_t done = 0;
            for (size_t cut : cuts) {
              const size_t take = std::min(cut, n - done);
              const bool out_of_place = spans.size() % 2 == 1;
              if (out_of_place && take > 0) std::memset(out + done * element, 0xAB, take * element);
              spans.push_back({take * element, out + done * element,
                               out_of_place ? in + done * element : nullptr});
              done += take;
            }
            spans.push_back({(n - done) * element, out + done * element, nullptr});
            return tfdist::RingAllreduceSpans(transport, spans, dtype, ReduceOp::kSum, scale,
                                              segment_bytes);
          };
          CheckRun(Label(AllreduceAlgorithm::kRing, size, count, dtype, ReduceOp::kSum,
                         InProcessSendMode::kRendezvous) +
                       " spans segment=" + std::to_string(segment_bytes),
                   run, inputs, expected, count, dtype, InProcessSendMode::kRendezvous);
          for (int rank = 0; rank < size; ++rank) {
            CHECK_EQ_MSG(FirstMismatch(kept[rank], inputs[rank], tfdist::DataTypeSize(dtype)),
                         -1LL, "input of rank " << rank << " was modified");
          }
        }
      }
    }
  }
}

// Every algorithm applies the result scale once to each completed piece:
// exactly the sequential sum scaled as ConvertScaled scales it, in place and
// out of place, with the power-of-two fold (P = 3, 5) and without, for a
// scale float32 holds exactly (fused into the reduction) and one it does not.
TFDIST_TEST(AllreduceAppliesResultScaleEveryAlgorithm) {
  for (int size : {1, 2, 3, 4, 5, 8}) {
    for (double scale : {1.0 / size, 1.0 / 3.0}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, LargeTestCount(100003)}) {
        for (DataType dtype : {DataType::kFloat32, DataType::kInt32, DataType::kFloat64,
                               DataType::kFloat16}) {
          for (bool in_place : {false, true}) {
            const std::vector<Bytes> inputs = SumInputs(size, count, dtype);
            const Bytes expected = ScaledSum(inputs, count, dtype, scale);
            for (AllreduceAlgorithm algorithm : EveryAlgorithm()) {
              std::vector<Bytes> kept = inputs;
              auto run = [&](Transport& transport, void* buffer, size_t n) {
                const void* input = in_place ? buffer : kept[transport.rank()].data();
                const size_t bytes = n * tfdist::DataTypeSize(dtype);
                if (!in_place && bytes > 0) std::memset(buffer, 0xAB, bytes);
                return tfdist::RunAllreduce(algorithm, transport, input, buffer, n, dtype,
                                            ReduceOp::kSum, scale);
              };
              CheckRun(Label(algorithm, size, count, dtype, ReduceOp::kSum,
                             InProcessSendMode::kBuffered) +
                           " scale=" + std::to_string(scale) +
                           (in_place ? " in place" : " out of place"),
                       run, inputs, expected, count, dtype, InProcessSendMode::kBuffered);
            }
          }
        }
      }
    }
  }
}

// With inexact floating-point inputs the algorithms may round differently
// from the sequential reference, but all ranks must still agree bit for bit
// (replicas of a model must not drift apart).
TFDIST_TEST(AllreduceRanksAgreeOnInexactFloats) {
  for (AllreduceAlgorithm algorithm : TransportAlgorithms()) {
    for (int size : {3, 5, 8, 13}) {
      for (DataType dtype : {DataType::kFloat32, DataType::kFloat16,
                             DataType::kBFloat16}) {
        const size_t count = 1001;
        const size_t element_size = tfdist::DataTypeSize(dtype);
        std::vector<Bytes> buffers(size, Bytes(count * element_size));
        for (int rank = 0; rank < size; ++rank) {
          for (size_t i = 0; i < count; ++i) {
            const float value =
                std::sin(static_cast<float>(rank * 1000 + i)) * 3.3f;
            unsigned char* element = buffers[rank].data() + i * element_size;
            if (dtype == DataType::kFloat32) {
              std::memcpy(element, &value, sizeof(value));
            } else {
              const uint16_t bits = dtype == DataType::kFloat16
                                        ? tfdist::FloatToHalf(value)
                                        : tfdist::FloatToBFloat16(value);
              std::memcpy(element, &bits, sizeof(bits));
            }
          }
        }
        const std::vector<Status> statuses =
            tfdist::RunOnThreads(size, [&](Transport& transport) {
              return tfdist::RunAllreduce(algorithm, transport,
                                          buffers[transport.rank()].data(),
                                          count, dtype, ReduceOp::kSum);
            });
        for (int rank = 0; rank < size; ++rank) {
          CHECK_OK(statuses[rank]);
          CHECK_EQ_MSG(FirstMismatch(buffers[rank], buffers[0], element_size),
                       -1LL,
                       tfdist::AllreduceAlgorithmName(algorithm)
                           << " P=" << size << " " << tfdist::DataTypeName(dtype)
                           << " rank " << rank << " differs from rank 0");
        }
      }
    }
  }
}

// Misuse is an error on every rank, never a hang.
TFDIST_TEST(AllreduceRejectsBoolAutoAndMpi) {
  for (AllreduceAlgorithm algorithm : TransportAlgorithms()) {
    Bytes flags(3 * 10, 1);
    const std::vector<Status> statuses =
        tfdist::RunOnThreads(3, [&](Transport& transport) {
          return tfdist::RunAllreduce(algorithm, transport,
                                      flags.data() + 10 * transport.rank(), 10,
                                      DataType::kBool, ReduceOp::kSum);
        });
    for (const Status& status : statuses) {
      CHECK(status.code() == tfdist::StatusCode::kInvalidArgument);
    }
  }
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kMpi}) {
    float value = 1.0f;
    const std::vector<Status> statuses =
        tfdist::RunOnThreads(1, [&](Transport& transport) {
          return tfdist::RunAllreduce(algorithm, transport, &value, 1,
                                      DataType::kFloat32, ReduceOp::kSum);
        });
    CHECK(statuses[0].code() == tfdist::StatusCode::kInvalidArgument);
  }
}

TFDIST_TEST(AllreduceAlgorithmNamesRoundTrip) {
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kTree,
        AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRing,
        AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kMpi}) {
    AllreduceAlgorithm parsed = AllreduceAlgorithm::kAuto;
    CHECK(tfdist::ParseAllreduceAlgorithm(
        tfdist::AllreduceAlgorithmName(algorithm), &parsed));
    CHECK(parsed == algorithm);
  }
  AllreduceAlgorithm parsed = AllreduceAlgorithm::kTree;
  CHECK(!tfdist::ParseAllreduceAlgorithm("Ring", &parsed));
  CHECK(!tfdist::ParseAllreduceAlgorithm("", &parsed));
  CHECK(parsed == AllreduceAlgorithm::kTree);
}

}  // namespace tfdist_test
