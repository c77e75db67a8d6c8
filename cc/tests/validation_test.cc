// ValidateAcrossRanks: the first field that matters for the collective and
// differs is named with rank 0's and the differing rank's values; fields that
// may differ (allgather's rows, alltoall's splits, a barrier's shape) pass.
#include <string>
#include <vector>

#include "cc/core/runtime/validation.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

TensorDescription Of(CollectiveType type) {
  TensorDescription d;
  d.type = type;
  d.shape = {4, 3};
  return d;
}

// The message for rank 0 = `base` and rank 2 = `changed(base)`; "" when valid.
template <typename Change>
std::string MismatchOf(const TensorDescription& base, Change change) {
  std::vector<TensorDescription> per_rank(3, base);
  change(per_rank[2]);
  const Status status = ValidateAcrossRanks("t", per_rank);
  if (status.ok()) return "";
  CHECK(status.code() == StatusCode::kFailedPrecondition);
  return status.message();
}

std::string Expected(const char* type, const char* field, const char* a, const char* b) {
  return std::string("tfdist: ranks disagree on the ") + field + " of tensor 't' (" + type +
         "): rank 0 has " + a + ", rank 2 has " + b;
}

TFDIST_TEST(ValidationNamesEachFieldThatMustAgree) {
  const TensorDescription allreduce = Of(CollectiveType::kAllreduce);
  using D = TensorDescription;
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.type = CollectiveType::kBroadcast; }),
           Expected("allreduce", "collective", "allreduce", "broadcast"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.dtype = DataType::kInt32; }),
           Expected("allreduce", "dtype", "float32", "int32"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.shape = {4, 2}; }),
           Expected("allreduce", "shape", "[4, 3]", "[4, 2]"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.op = ReduceOp::kMax; }),
           Expected("allreduce", "reduction op", "sum", "max"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.prescale = 0.1; }),
           Expected("allreduce", "prescale factor", "1", "0.10000000000000001"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.postscale = 0.5; }),
           Expected("allreduce", "postscale factor", "1", "0.5"));
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.algorithm = AllreduceAlgorithm::kRing; }),
           Expected("allreduce", "algorithm", "auto", "ring"));
  // The first differing field is the one named.
  CHECK_EQ(MismatchOf(allreduce, [](D& d) { d.postscale = 0.5; d.dtype = DataType::kInt32; }),
           Expected("allreduce", "dtype", "float32", "int32"));
  CHECK_EQ(MismatchOf(Of(CollectiveType::kBroadcast), [](D& d) { d.root = 2; }),
           Expected("broadcast", "root rank", "0", "2"));
  CHECK_EQ(MismatchOf(Of(CollectiveType::kReducescatter), [](D& d) { d.op = ReduceOp::kMin; }),
           Expected("reducescatter", "reduction op", "sum", "min"));
  CHECK_EQ(MismatchOf(Of(CollectiveType::kAllgather), [](D& d) { d.shape = {4}; }),
           Expected("allgather", "number of dimensions", "2", "1"));
  CHECK_EQ(MismatchOf(Of(CollectiveType::kAlltoall), [](D& d) { d.shape = {4, 5}; }),
           Expected("alltoall", "shape after the first dimension", "[?, 3]", "[?, 5]"));
}

// A compressor's settings are compared before every other field and the
// message names the first setting that differs.
TFDIST_TEST(ValidationNamesTheCompressorSettingThatDiffers) {
  using D = TensorDescription;
  TensorDescription base = Of(CollectiveType::kAllreduce);
  base.compressor = "topk ratio=0.1 error_feedback=True momentum=0.0 start_step=0";
  const std::string ratio =
      MismatchOf(base, [](D& d) {
        d.compressor = "topk ratio=0.2 error_feedback=True momentum=0.0 start_step=0";
        d.shape = {4, 2};  // what the settings cause; they are the cause named
      });
  CHECK_EQ(ratio, std::string("tfdist: ranks disagree on the compressor setting ratio of "
                              "tensor 't' (allreduce): rank 0 has 0.1, rank 2 has 0.2 "
                              "(rank 0: topk ratio=0.1 error_feedback=True momentum=0.0 "
                              "start_step=0; rank 2: topk ratio=0.2 error_feedback=True "
                              "momentum=0.0 start_step=0)"));
  const std::string kind = MismatchOf(base, [](D& d) {
    d.compressor = "powersgd rank=1 error_feedback=True start_step=0";
  });
  CHECK(kind.find("on the compressor of tensor 't' (allreduce): rank 0 has topk, rank 2 has "
                  "powersgd") != std::string::npos);
  const std::string none = MismatchOf(base, [](D& d) { d.compressor.clear(); });
  CHECK(none.find("rank 2 has none") != std::string::npos);
  // A rank that sends the tensor as fp16 instead of top-k: named as such.
  const std::string fp16 = MismatchOf(base, [](D& d) {
    d.compressor.clear();
    d.compression = WireCompression::kFloat16;
    d.dtype = DataType::kFloat32;
  });
  CHECK(fp16.find("on the compressor of tensor 't' (allreduce): rank 0 has topk, rank 2 has "
                  "fp16 (rank 0: topk ratio=0.1") != std::string::npos);
  CHECK_EQ(MismatchOf(base, [](D&) {}), std::string());
}

TFDIST_TEST(ValidationIgnoresFieldsThatMayDiffer) {
  using D = TensorDescription;
  CHECK_EQ(MismatchOf(Of(CollectiveType::kAllgather), [](D& d) { d.shape[0] = 9; }), "");
  CHECK_EQ(MismatchOf(Of(CollectiveType::kAlltoall), [](D& d) { d.splits = {1, 2, 1}; }), "");
  CHECK_EQ(MismatchOf(Of(CollectiveType::kBarrier), [](D& d) { d.shape = {}; }), "");
  // Fields a collective does not use.
  CHECK_EQ(MismatchOf(Of(CollectiveType::kAllreduce), [](D& d) { d.root = 1; }), "");
  CHECK_EQ(MismatchOf(Of(CollectiveType::kBroadcast), [](D& d) { d.op = ReduceOp::kMax; }), "");
  CHECK_EQ(MismatchOf(Of(CollectiveType::kReducescatter),
                      [](D& d) { d.algorithm = AllreduceAlgorithm::kTree; }),
           "");
}

}  // namespace
}  // namespace tfdist
