// Adasum allreduce: recursive pairwise adaptive summation.
//
// Adasum (Maleki et al., MLSys 2021) combines two gradients a and b as
//   A(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b:
// orthogonal gradients add up, identical ones give the gradient once, and
// in between the shared component is counted once. P gradients are combined
// pairwise along a binary tree. Every tensor of a fused buffer is combined
// on its own, with its own dot product and norms (accumulated in double).
//
// Pairing order (what a reference must follow to reproduce the bits), with
// P = p2 + r, p2 the largest power of two <= P (PowerOfTwoFold's numbering):
//  1. Fold: for i < r, rank 2i sends its vector to rank 2i+1, which holds
//     u_i = A(x_2i, x_2i+1); ranks j >= 2r hold u_(j-r) = x_j. Rank 2i sits
//     out until step 3.
//  2. Butterfly over the p2 virtual ranks: in round k = 0 .. log2(p2)-1,
//     virtual rank v exchanges its whole vector with v XOR 2^k and both
//     compute A(lower, higher) of the two (the lower virtual rank's vector
//     first). After the rounds every virtual rank holds the balanced binary
//     tree over u_0 .. u_(p2-1) in order: A(A(u0, u1), A(u2, u3)), ...
//  3. Unfold: rank 2i+1 sends the result to rank 2i.
// A is symmetric bit for bit (the products and the final sum commute), so
// partners, each computing A(own, received), end with identical bits.
//
// Steps: log2(p2) exchange rounds (+ 2 fold messages when P != p2).
// Bytes on the wire per rank: m sent and m received per round, m*log2(p2) in
// total (+ m for fold partners): the butterfly's cost, plus the dot
// products and norms, three passes over 2m elements per round. Unlike a sum,
// A is not associative, so the bandwidth-optimal reduce-scatter algorithms
// (ring, Rabenseifner) do not apply as they are; Adasum's gain is in the
// optimiser's convergence, not in the wire time.
#include "cc/core/collectives/adasum_allreduce.h"

#include <cstdint>

#include "cc/core/transport/collective_tags.h"
#include "cc/core/collectives/power_of_two_fold.h"
#include "cc/core/collectives/thread_scratch.h"
#include "cc/core/numeric/half.h"

namespace tfdist {

namespace {

// Element access in double, whatever the storage type.
struct Float32 {
  using T = float;
  static double Load(T v) { return v; }
  static T Store(double v) { return static_cast<T>(v); }
};
struct Float64 {
  using T = double;
  static double Load(T v) { return v; }
  static T Store(double v) { return v; }
};
struct Half {
  using T = uint16_t;
  static double Load(T v) { return HalfToFloat(v); }
  static T Store(double v) { return FloatToHalf(static_cast<float>(v)); }
};
struct BFloat {
  using T = uint16_t;
  static double Load(T v) { return BFloat16ToFloat(v); }
  static T Store(double v) { return FloatToBFloat16(static_cast<float>(v)); }
};

// 1 - dot / (2 |x|^2), or 1 for a zero x (which then contributes nothing
// and leaves the other vector as it is).
double Coefficient(double dot, double norm_squared) {
  return norm_squared == 0.0 ? 1.0 : 1.0 - dot / (2.0 * norm_squared);
}

template <typename E>
void Combine(void* a_data, const void* b_data, size_t count) {
  using T = typename E::T;
  T* a = static_cast<T*>(a_data);
  const T* b = static_cast<const T*>(b_data);
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double x = E::Load(a[i]);
    const double y = E::Load(b[i]);
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  const double ca = Coefficient(dot, aa);
  const double cb = Coefficient(dot, bb);
  for (size_t i = 0; i < count; ++i) {
    a[i] = E::Store(ca * E::Load(a[i]) + cb * E::Load(b[i]));
  }
}

// Combines each tensor of `mine` with the same tensor of `other`.
void CombineTensors(void* mine, const void* other, const std::vector<size_t>& counts,
                    DataType dtype) {
  const size_t element = DataTypeSize(dtype);
  size_t offset = 0;
  for (size_t count : counts) {
    AdasumCombine(static_cast<unsigned char*>(mine) + offset,
                  static_cast<const unsigned char*>(other) + offset, count, dtype);
    offset += count * element;
  }
}

}  // namespace

Status CheckAdasumType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return Status::OK();
    default:
      return Status::InvalidArgument(
          std::string("Adasum combines floating-point tensors only (float16, bfloat16, "
                      "float32 or float64), got ") + DataTypeName(dtype));
  }
}

void AdasumCombine(void* a, const void* b, size_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return Combine<Half>(a, b, count);
    case DataType::kBFloat16: return Combine<BFloat>(a, b, count);
    case DataType::kFloat32: return Combine<Float32>(a, b, count);
    case DataType::kFloat64: return Combine<Float64>(a, b, count);
    default: return;
  }
}

Status AdasumAllreduce(Transport& transport, void* buffer, const std::vector<size_t>& counts,
                       DataType dtype) {
  TFDIST_RETURN_IF_ERROR(CheckAdasumType(dtype));
  size_t count = 0;
  for (size_t c : counts) count += c;
  if (transport.size() == 1 || count == 0) return Status::OK();

  const size_t bytes = count * DataTypeSize(dtype);
  unsigned char* incoming = ThreadScratch(bytes);
  const PowerOfTwoFold fold(transport.rank(), transport.size());
  const int rank = transport.rank();
  // Step 1. The pairs of the fold are ranks (2i, 2i+1): the odd one plays
  // the virtual rank and combines A(x_2i, x_2i+1), the even one's first.
  const bool folds = rank < 2 * (transport.size() - fold.group_size());
  if (folds && !fold.participates()) {
    TFDIST_RETURN_IF_ERROR(transport.Send(rank + 1, buffer, bytes, kAdasumTag));
  } else if (folds) {
    TFDIST_RETURN_IF_ERROR(transport.Recv(rank - 1, incoming, bytes, kAdasumTag));
    CombineTensors(buffer, incoming, counts, dtype);
  }
  // Step 2.
  if (fold.participates()) {
    for (int mask = 1; mask < fold.group_size(); mask <<= 1) {
      const int peer = fold.RealRank(fold.virtual_rank() ^ mask);
      TFDIST_RETURN_IF_ERROR(
          transport.SendRecv(peer, buffer, bytes, peer, incoming, bytes, kAdasumTag));
      CombineTensors(buffer, incoming, counts, dtype);
    }
  }
  // Step 3.
  if (folds && !fold.participates()) {
    return transport.Recv(rank + 1, buffer, bytes, kAdasumTag);
  }
  if (folds) return transport.Send(rank - 1, buffer, bytes, kAdasumTag);
  return Status::OK();
}

}  // namespace tfdist
