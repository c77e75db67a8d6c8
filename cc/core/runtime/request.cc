#include "cc/core/runtime/request.h"

#include "cc/core/collectives/adasum_allreduce.h"
#include "cc/core/numeric/convert.h"

namespace tfdist {

const char* CollectiveTypeName(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllreduce: return "allreduce";
    case CollectiveType::kAllgather: return "allgather";
    case CollectiveType::kBroadcast: return "broadcast";
    case CollectiveType::kAlltoall: return "alltoall";
    case CollectiveType::kReducescatter: return "reducescatter";
    case CollectiveType::kBarrier: return "barrier";
    case CollectiveType::kJoin: return "join";
  }
  return "unknown";
}

int64_t TensorDescription::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorDescription::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {
constexpr char kSequenceMarker[] = ".eager.";
}  // namespace

std::string SequenceName(const std::string& prefix, uint64_t n) {
  return prefix + kSequenceMarker + std::to_string(n);
}

bool IsSequenceName(const std::string& name) {
  const size_t marker = name.rfind(kSequenceMarker);
  if (marker == std::string::npos) return false;
  const size_t digits = marker + sizeof(kSequenceMarker) - 1;
  if (digits == name.size()) return false;
  for (size_t i = digits; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

Status DescribeAlgorithm(int algorithm_code, TensorDescription* d) {
  if (algorithm_code < 0 || algorithm_code >= kAllreduceAlgorithmCount) {
    return Status::InvalidArgument("unknown allreduce algorithm " +
                                   std::to_string(algorithm_code));
  }
  d->algorithm = static_cast<AllreduceAlgorithm>(algorithm_code);
  return Status::OK();
}

const char* CombinerName(Combiner combiner) {
  switch (combiner) {
    case Combiner::kElementwise: return "elementwise (Sum, Average, Min, Max or Product)";
    case Combiner::kAdasum: return "Adasum";
  }
  return "unknown";
}

Status DescribeReduction(int reduce_op_code, double prescale, double postscale,
                         int size, TensorDescription* d) {
  if (reduce_op_code < 0 || reduce_op_code > kAdasumCode) {
    return Status::InvalidArgument("unknown reduce_op " + std::to_string(reduce_op_code));
  }
  const bool average = reduce_op_code == kAverageCode;
  const bool adasum = reduce_op_code == kAdasumCode;
  if (adasum && d->type != CollectiveType::kAllreduce) {
    return Status::InvalidArgument(std::string("Adasum combines allreduces only, not ") +
                                   CollectiveTypeName(d->type) +
                                   "; use Sum, Average, Min, Max or Product");
  }
  if (adasum) TFDIST_RETURN_IF_ERROR(CheckAdasumType(d->dtype));
  d->combiner = adasum ? Combiner::kAdasum : Combiner::kElementwise;
  d->op = average || adasum ? ReduceOp::kSum : static_cast<ReduceOp>(reduce_op_code);
  d->prescale = prescale;
  d->postscale = average ? postscale / size : postscale;
  return Status::OK();
}

const char* WireCompressionName(WireCompression compression) {
  switch (compression) {
    case WireCompression::kNone: return "none";
    case WireCompression::kFloat16: return "fp16";
    case WireCompression::kBFloat16: return "bf16";
  }
  return "unknown";
}

Status DescribeCompression(int compression_code, TensorDescription* d) {
  if (compression_code < 0 || compression_code > static_cast<int>(WireCompression::kBFloat16)) {
    return Status::InvalidArgument("unknown compression code " + std::to_string(compression_code));
  }
  const auto compression = static_cast<WireCompression>(compression_code);
  if (compression != WireCompression::kNone && d->combiner == Combiner::kAdasum) {
    return Status::InvalidArgument(std::string("compression=") +
                                   WireCompressionName(compression) +
                                   " cannot be combined with Adasum");
  }
  if (compression != WireCompression::kNone && d->op != ReduceOp::kSum) {
    return Status::InvalidArgument(std::string("compression=") + WireCompressionName(compression) +
                                   " needs op Sum or Average, got " + ReduceOpName(d->op));
  }
  const bool floating = d->dtype == DataType::kFloat16 || d->dtype == DataType::kBFloat16 ||
                        d->dtype == DataType::kFloat32 || d->dtype == DataType::kFloat64;
  d->compression = floating ? compression : WireCompression::kNone;
  return Status::OK();
}

DataType WireType(const TensorDescription& d) {
  switch (d.compression) {
    case WireCompression::kFloat16: return DataType::kFloat16;
    case WireCompression::kBFloat16: return DataType::kBFloat16;
    case WireCompression::kNone: break;
  }
  return AccumulationType(d.dtype);
}

std::string TensorDescription::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace tfdist
