#include "cc/core/runtime/validation.h"

#include <algorithm>
#include <sstream>

namespace tfdist {

namespace {

using D = TensorDescription;

// Field values as the messages show them.
std::string Text(CollectiveType type) { return CollectiveTypeName(type); }
std::string Text(DataType dtype) { return DataTypeName(dtype); }
std::string Text(ReduceOp op) { return ReduceOpName(op); }
std::string Text(AllreduceAlgorithm algorithm) { return AllreduceAlgorithmName(algorithm); }
std::string Text(WireCompression compression) { return WireCompressionName(compression); }
std::string Text(Combiner combiner) { return CombinerName(combiner); }
std::string Text(int value) { return std::to_string(value); }
std::string Text(double value) {
  std::ostringstream s;
  s.precision(17);
  s << value;
  return s.str();
}
std::string Text(const std::vector<int64_t>& dimensions) {
  std::string s = "[";
  for (size_t i = 0; i < dimensions.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(dimensions[i]);
  }
  return s + "]";
}

// The shape with its first dimension, which may differ, shown as "?".
std::string ShapeTail(const D& d) {
  std::string s = "[?";
  for (size_t i = 1; i < d.shape.size(); ++i) s += ", " + std::to_string(d.shape[i]);
  return s + "]";
}

// Allgather and alltoall ranks may contribute different numbers of rows.
bool FirstDimensionMayDiffer(CollectiveType type) {
  return type == CollectiveType::kAllgather || type == CollectiveType::kAlltoall;
}

template <typename Field>
bool IsShape(Field) {
  return false;
}
bool IsShape(std::vector<int64_t> D::*field) { return field == &D::shape; }

template <typename T>
bool Agrees(const T& a, const T& b, bool, CollectiveType) {
  return a == b;
}
bool Agrees(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool shape,
            CollectiveType type) {
  if (!shape || !FirstDimensionMayDiffer(type)) return a == b;
  return a.size() == b.size() && std::equal(a.begin() + (a.empty() ? 0 : 1), a.end(),
                                            b.begin() + (b.empty() ? 0 : 1));
}

// True when every rank agrees with rank 0 on every field its collective
// checks; the common case, answered without building any message.
bool AllAgree(const std::vector<D>& per_rank) {
  const D& first = per_rank[0];
  const unsigned bit = CollectiveBit(first.type);
  bool agree = true;
  for (size_t r = 1; r < per_rank.size() && agree; ++r) {
    ForEachDescriptionField([&](auto field, const DescriptionField& role) {
      if (agree && (role.must_agree_for & bit)) {
        agree = Agrees(first.*field, per_rank[r].*field, IsShape(field), first.type);
      }
    });
  }
  return agree;
}

// Compares one property of every rank with rank 0's, naming both values.
template <typename Getter>
Status Agree(const std::string& name, const std::vector<D>& per_rank, const char* property,
             Getter get) {
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

}  // namespace

Status ValidateAcrossRanks(const std::string& name, const std::vector<D>& per_rank) {
  if (AllAgree(per_rank)) return Status::OK();
  // Some field differs: find the first one that matters and name it.
  const CollectiveType type = per_rank[0].type;
  Status status;
  ForEachDescriptionField([&](auto field, const DescriptionField& role) {
    if (!status.ok() || !(role.must_agree_for & CollectiveBit(type))) return;
    if (IsShape(field) && FirstDimensionMayDiffer(type)) {
      status = Agree(name, per_rank, "number of dimensions",
                     [](const D& d) { return std::to_string(d.shape.size()); });
      if (status.ok()) status = Agree(name, per_rank, "shape after the first dimension", ShapeTail);
      return;
    }
    status = Agree(name, per_rank, role.name, [&](const D& d) { return Text(d.*field); });
  });
  return status;
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
