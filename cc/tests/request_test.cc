// Request helpers: sequence names and reduction descriptions.
#include "cc/core/runtime/request.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

TFDIST_TEST(SequenceNamesAreRecognisedByTheirShape) {
  CHECK(SequenceName("TfdistAllreduce", 17) == "TfdistAllreduce.eager.17");
  CHECK(IsSequenceName(SequenceName("TfdistAllreduce", 0)));
  CHECK(IsSequenceName("x.eager.123"));
  CHECK(!IsSequenceName("x.eager."));
  CHECK(!IsSequenceName("x.eager.12a"));
  CHECK(!IsSequenceName("grads/dense.kernel"));
  CHECK(!IsSequenceName("model.eager.layer"));
}

TFDIST_TEST(AverageIsSumWithAPostscaleOfOneOverSize) {
  TensorDescription d;
  CHECK(DescribeReduction(kAverageCode, 2.0, 3.0, 4, &d).ok());
  CHECK(d.op == ReduceOp::kSum && d.prescale == 2.0 && d.postscale == 0.75);
  CHECK(DescribeReduction(static_cast<int>(ReduceOp::kMax), 1.0, 1.0, 4, &d).ok());
  CHECK(d.op == ReduceOp::kMax && d.postscale == 1.0);
  CHECK(!DescribeReduction(kAdasumCode + 1, 1.0, 1.0, 4, &d).ok());
  CHECK(!DescribeReduction(-1, 1.0, 1.0, 4, &d).ok());
}

TFDIST_TEST(AdasumIsSumCombinedByAdasumForFloatingAllreducesOnly) {
  TensorDescription d;
  CHECK(DescribeReduction(kAdasumCode, 1.0, 1.0, 4, &d).ok());
  CHECK(d.op == ReduceOp::kSum && d.combiner == Combiner::kAdasum && d.postscale == 1.0);
  CHECK(!DescribeCompression(1, &d).ok());
  d.dtype = DataType::kInt32;
  const Status integer = DescribeReduction(kAdasumCode, 1.0, 1.0, 4, &d);
  CHECK(integer.code() == StatusCode::kInvalidArgument);
  CHECK(integer.message().find("Adasum") != std::string::npos &&
        integer.message().find("int32") != std::string::npos);
  d.dtype = DataType::kFloat32;
  d.type = CollectiveType::kReducescatter;
  CHECK(!DescribeReduction(kAdasumCode, 1.0, 1.0, 4, &d).ok());
}

}  // namespace
}  // namespace tfdist
