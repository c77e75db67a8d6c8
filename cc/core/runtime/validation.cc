#include "cc/core/runtime/validation.h"

#include <algorithm>
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

// True when every rank agrees with rank 0 on everything the collective
// checks; the common case, answered without building any message.
bool AllAgree(const std::vector<TensorDescription>& per_rank) {
  const TensorDescription& first = per_rank[0];
  const bool first_dimension_may_differ =
      first.type == CollectiveType::kAllgather || first.type == CollectiveType::kAlltoall;
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const TensorDescription& d = per_rank[r];
    if (d.type != first.type || d.dtype != first.dtype || d.op != first.op ||
        d.root != first.root || d.prescale != first.prescale ||
        d.postscale != first.postscale || d.algorithm != first.algorithm ||
        d.compression != first.compression ||
        d.shape.size() != first.shape.size()) {
      return false;
    }
    for (size_t i = first_dimension_may_differ ? 1 : 0; i < d.shape.size(); ++i) {
      if (d.shape[i] != first.shape[i]) return false;
    }
  }
  return true;
}

}  // namespace

Status ValidateAcrossRanks(const std::string& name,
                           const std::vector<TensorDescription>& per_rank) {
  if (AllAgree(per_rank)) return Status::OK();
  // Some property differs: find the first one that matters and name it.
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
    case CollectiveType::kJoin:
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
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "compression", [](const D& d) {
      return std::string(WireCompressionName(d.compression));
    }));
  }
  if (type == CollectiveType::kBroadcast) {
    TFDIST_RETURN_IF_ERROR(Agree(name, per_rank, "root rank",
                                 [](const D& d) { return std::to_string(d.root); }));
  }
  return Status::OK();
}

std::string RankList(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

Status ValidateStandIns(const std::string& name, const TensorDescription& description,
                        const std::vector<int>& stand_ins) {
  if (stand_ins.empty()) return Status::OK();
  const std::string joined = "rank" + std::string(stand_ins.size() > 1 ? "s " : " ") +
                             RankList(stand_ins) + (stand_ins.size() > 1 ? " have" : " has") +
                             " called tfdist.join()";
  if (description.type == CollectiveType::kAlltoall) {
    return Status::FailedPrecondition("tfdist: alltoall '" + name + "' cannot run while " +
                                      joined + ": the rows sent to it would be lost");
  }
  if (description.type == CollectiveType::kBroadcast &&
      std::find(stand_ins.begin(), stand_ins.end(), description.root) != stand_ins.end()) {
    return Status::FailedPrecondition("tfdist: broadcast '" + name + "' has root rank " +
                                      std::to_string(description.root) + ", but " + joined +
                                      " and has nothing to send");
  }
  return Status::OK();
}

}  // namespace tfdist
