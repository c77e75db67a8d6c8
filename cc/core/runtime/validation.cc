#include "cc/core/runtime/validation.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

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
std::string Text(const std::string& value) { return value.empty() ? "none" : value; }
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
template <typename Field>
bool IsCompressor(Field) {
  return false;
}
bool IsCompressor(std::string D::*field) { return field == &D::compressor; }

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

// "<kind> key=value ..." (request.h) as the kind and the pairs in order.
std::vector<std::pair<std::string, std::string>> SettingsItems(const std::string& settings) {
  std::vector<std::pair<std::string, std::string>> items;
  std::istringstream words(settings);
  std::string word;
  bool first = true;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (first || eq == std::string::npos) {
      items.emplace_back(first ? "kind" : word, first ? word : "");
    } else {
      items.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    }
    first = false;
  }
  return items;
}

// A description's compressor as the messages name it: the top-k or
// PowerSGD settings, else the allreduce's wire compression ("none", "fp16",
// "bf16"), which is what a rank that did not use top-k or PowerSGD used.
std::string CompressorText(const D& d) {
  if (!d.compressor.empty()) return d.compressor;
  return d.type == CollectiveType::kAllreduce ? Text(d.compression) : Text(d.compressor);
}

// The compressors' settings: names the first setting that differs and both
// values, then both full settings for context.
Status AgreeOnCompressor(const std::string& name, const std::vector<D>& per_rank) {
  const std::string expected = CompressorText(per_rank[0]);
  for (size_t r = 1; r < per_rank.size(); ++r) {
    if (per_rank[r].compressor == per_rank[0].compressor) continue;
    const std::string actual = CompressorText(per_rank[r]);
    const auto a = SettingsItems(expected);
    const auto b = SettingsItems(actual);
    std::string setting = "compressor", va = Text(expected), vb = Text(actual);
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].first != b[i].first) break;
      if (a[i].second != b[i].second) {
        setting = a[i].first == "kind" ? "compressor" : "compressor setting " + a[i].first;
        va = a[i].second;
        vb = b[i].second;
        break;
      }
    }
    std::ostringstream m;
    m << "tfdist: ranks disagree on the " << setting << " of tensor '" << name << "' ("
      << CollectiveTypeName(per_rank[0].type) << "): rank 0 has " << va << ", rank " << r
      << " has " << vb << " (rank 0: " << Text(expected) << "; rank " << r << ": "
      << Text(actual) << ")";
    return Status::FailedPrecondition(m.str());
  }
  return Status::OK();
}

}  // namespace

Status ValidateAcrossRanks(const std::string& name, const std::vector<D>& per_rank) {
  if (AllAgree(per_rank)) return Status::OK();
  // Some field differs: find the first one that matters and name it.
  const CollectiveType type = per_rank[0].type;
  // The compressor's settings first: ranks whose compressors differ send
  // differently shaped buffers, and the settings are the cause to name.
  Status status = AgreeOnCompressor(name, per_rank);
  if (!status.ok()) return status;
  ForEachDescriptionField([&](auto field, const DescriptionField& role) {
    if (!status.ok() || !(role.must_agree_for & CollectiveBit(type))) return;
    if (IsCompressor(field)) return;  // compared above
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
