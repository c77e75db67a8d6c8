// What a kernel hands the runtime: the tensor's identity and description
// (compared across ranks), its buffers, and the callback that completes it.
#ifndef TFDIST_CORE_RUNTIME_REQUEST_H_
#define TFDIST_CORE_RUNTIME_REQUEST_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"

namespace tfdist {

enum class CollectiveType : int {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  // tfdist.join: completes once every rank has joined (join_state.h).
  kJoin = 6,
};

const char* CollectiveTypeName(CollectiveType type);

// How an allreduce's floating tensors cross the wire (tfdist.Compression's
// dense compressors): as themselves (16-bit floats staged in float32), or
// rounded to 16 bits while they are packed and widened while unpacked.
// Values are the ops' `compression` attribute codes.
enum class WireCompression : int {
  kNone = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
};

const char* WireCompressionName(WireCompression compression);

// How an allreduce combines the ranks' tensors: element by element with
// `op`, or by Adasum (adasum_allreduce.h), which sees whole tensors.
enum class Combiner : int {
  kElementwise = 0,
  kAdasum = 1,
};

const char* CombinerName(Combiner combiner);

// Everything that must agree between ranks for a collective to be valid.
// Travels between ranks during negotiation (see negotiation.h). A new field
// is declared here and listed once in ForEachDescriptionField below, which
// the wire format, the response cache, validation and fusion all read.
struct TensorDescription {
  CollectiveType type = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  ReduceOp op = ReduceOp::kSum;
  Combiner combiner = Combiner::kElementwise;
  int root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  WireCompression compression = WireCompression::kNone;
  // The settings of the top-k or PowerSGD compressor a collective serves,
  // as "<kind> key=value ..." (tfdist/sparse_compression.py); empty for
  // everything else. Ranks whose compressors differ would otherwise exchange
  // buffers of different layouts or take different paths; as a field, a
  // difference is an error naming the setting and both values.
  std::string compressor;
  // Alltoall only: rows this rank sends to each rank. Differs per rank.
  std::vector<int64_t> splits;
  // A member of a grouped op (tfdist.grouped_*), named "<group>.<i>": the
  // number of tensors in its group; 0 for a collective of its own.
  int group_size = 0;

  int64_t num_elements() const;
  // Elements in one row (the product of all but the first dimension).
  int64_t row_elements() const;
  std::string ShapeString() const;
};

// A field's part in the runtime contract.
struct DescriptionField {
  // How mismatch messages name it: "ranks disagree on the <name> of ...".
  const char* name;
  // The collectives whose ranks must agree on it: a bit (1 << type) each;
  // 0 for a field that differs between ranks by design.
  unsigned must_agree_for;
  // Allreduces share a fused collective only when it is equal (fusion.h).
  bool fusion_key;
};

constexpr unsigned CollectiveBit(CollectiveType type) { return 1u << static_cast<int>(type); }

// Calls visit(&TensorDescription::field, DescriptionField) for every field,
// in the order in which they travel and in which a mismatch is looked for.
// For the shape, allgather and alltoall agree on all but the first
// dimension (validation.cc); every other field is compared whole.
template <typename Visit>
void ForEachDescriptionField(Visit&& visit) {
  using D = TensorDescription;
  constexpr unsigned kAll = ~0u;
  constexpr unsigned kReductions =
      CollectiveBit(CollectiveType::kAllreduce) | CollectiveBit(CollectiveType::kReducescatter);
  constexpr unsigned kWithData =
      kReductions | CollectiveBit(CollectiveType::kAllgather) |
      CollectiveBit(CollectiveType::kBroadcast) | CollectiveBit(CollectiveType::kAlltoall);
  visit(&D::type, DescriptionField{"collective", kAll, false});
  visit(&D::group_size, DescriptionField{"number of tensors in the group", kAll, false});
  visit(&D::dtype, DescriptionField{"dtype", kAll, true});
  visit(&D::shape, DescriptionField{"shape", kWithData, false});
  // Before op: Adasum is described as Sum combined by Adasum, and a rank
  // with Adasum against one with Min is reported as such.
  visit(&D::combiner, DescriptionField{"reduction op", kReductions, true});
  visit(&D::op, DescriptionField{"reduction op", kReductions, true});
  visit(&D::root, DescriptionField{"root rank", CollectiveBit(CollectiveType::kBroadcast), false});
  visit(&D::prescale, DescriptionField{"prescale factor", kReductions, true});
  visit(&D::postscale, DescriptionField{"postscale factor", kReductions, true});
  visit(&D::algorithm,
        DescriptionField{"algorithm", CollectiveBit(CollectiveType::kAllreduce), true});
  visit(&D::compression,
        DescriptionField{"compression", CollectiveBit(CollectiveType::kAllreduce), true});
  visit(&D::compressor, DescriptionField{"compressor settings", kAll, true});
  visit(&D::splits, DescriptionField{"splits", 0, false});
}

// Names of unnamed eager collectives: "<prefix>.eager.<n>", n from a
// per-process sequence. Such a name never recurs, so negotiation does not
// keep it in the response cache (where it would only evict tensors that do
// recur). Decided from the name alone, so every rank decides alike.
std::string SequenceName(const std::string& prefix, uint64_t n);
bool IsSequenceName(const std::string& name);

// The reduce_op code of the Python API and the ops: ReduceOp's values plus
// Average, which is Sum with a postscale of 1/size.
constexpr int kAverageCode = 4;
// ... and Adasum: Sum's op with the Adasum combiner, for floating-point
// allreduces only.
constexpr int kAdasumCode = 5;

// Sets d's algorithm from the ops' algorithm code (AllreduceAlgorithm's
// value; InvalidArgument for an unknown code).
Status DescribeAlgorithm(int algorithm_code, TensorDescription* d);

// Sets d's op, combiner and scale factors from the API's reduce_op code
// (InvalidArgument for an unknown code, and for Adasum on anything but a
// floating-point allreduce).
Status DescribeReduction(int reduce_op_code, double prescale, double postscale,
                         int size, TensorDescription* d);

// Sets d's compression from the ops' code (after DescribeReduction):
// InvalidArgument for an unknown code or with Min, Max, Product or Adasum; on a
// tensor that is not floating point it stays kNone (passes through).
Status DescribeCompression(int compression_code, TensorDescription* d);

// The type an allreduce of `d` reduces and sends: the 16-bit type it is
// compressed to, else float32 for the 16-bit floats, else its own.
DataType WireType(const TensorDescription& d);

// Allocates the output once its shape is known (allgather, alltoall and
// reducescatter learn it only after negotiation). Called on the runtime's
// thread; returns the buffer through `data`.
using OutputAllocator =
    std::function<Status(const std::vector<int64_t>& shape, void** data)>;

struct Request {
  std::string name;
  TensorDescription description;
  const void* input = nullptr;
  // Set for allreduce and broadcast, whose output has the input's shape and
  // is allocated by the kernel before it enqueues.
  void* output = nullptr;
  OutputAllocator allocate_output;
  // Alltoall only: receives the rows that arrived from each rank.
  std::function<Status(const std::vector<int64_t>& received_splits)> report_splits;
  std::function<void(const Status&)> done;
  // Set on the request that a rank which has joined (join_state.h) runs in
  // place of a tensor it never submitted: it contributes the reduction's
  // identity or no rows, and its result is thrown away.
  bool stand_in = false;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_REQUEST_H_
