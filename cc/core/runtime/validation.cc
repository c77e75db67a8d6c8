#include "cc/core/runtime/validation.h"

#include <sstream>

namespace tfdist {

namespace {

// The shape with its first dimension, which may differ, shown as "?".
std::string ShapeTail(const TensorDescription& d) {
  std::string s = "[?";
  for (size_t i = 1; i < d.shape.size(); ++i) s += ", " + std::to_string(d.shape[i]);
  return s + "]";
}

// Compares one property of every rank with rank 0's, naming both values.
template <typename Getter>
Status Agree(const std::string& name, const std::vector<TensorDescription>& per_rank,
             const char* property, Getter get) {
  const std::string expected = get(per_rank[0]);
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const std::string actual = get(per_rank[r]);
    if (actual != expected) {
      std::ostringstream m;
      m << "tfdist: ranks disagree on the " << property << " of tensor '" << name
        << "' (" << CollectiveTypeName(per_rank[0].type) << "): rank 0 has "
        << expected << ", rank " << r << " has " << actual;
      return Status::FailedPrecondition(m.str());
    }
  }
  return Status::OK();
}

std::string Number(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

}  // namespace

Status ValidateAcrossRanks(const std::string& name,
                           const std::vector<TensorDescription>& per_rank) {
  using D = TensorDescription;
  TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "collective",
                               [](const D& d) { return std::string(CollectiveTypeName(d.type)); }));
  TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "dtype",
                               [](const D& d) { return std::string(DataTypeName(d.dtype)); }));
  const CollectiveType type = per_rank[0].type;
  switch (type) {
    case CollectiveType::kAllreduce:
    case CollectiveType::kBroadcast:
    case CollectiveType::kReducescatter:
      TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "shape",
                                   [](const D& d) { return d.ShapeString(); }));
      break;
    case CollectiveType::kAllgather:
    case CollectiveType::kAlltoall:
      TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "number of dimensions",
                                   [](const D& d) { return std::to_string(d.shape.size()); }));
      TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "shape after the first dimension",
                                   ShapeTail));
      break;
    case CollectiveType::kBarrier:
      break;
  }
  if (type == CollectiveType::kAllreduce || type == CollectiveType::kReducescatter) {
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "reduction op",
                                 [](const D& d) { return std::string(ReduceOpName(d.op)); }));
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "prescale factor",
                                 [](const D& d) { return Number(d.prescale); }));
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "postscale factor",
                                 [](const D& d) { return Number(d.postscale); }));
  }
  if (type == CollectiveType::kAllreduce) {
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "algorithm", [](const D& d) {
      return std::string(AllreduceAlgorithmName(d.algorithm));
    }));
  }
  if (type == CollectiveType::kBroadcast) {
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "root rank",
                                 [](const D& d) { return std::to_string(d.root); }));
  }
  return Status::OK();
}

}  // namespace tfdist
