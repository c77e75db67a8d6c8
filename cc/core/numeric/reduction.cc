#include "cc/core/numeric/reduction.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/half.h"
#include "cc/core/numeric/half_bulk.h"

namespace tfdist {
namespace {

// The operators, applied to one pair of elements or to one pair of GCC/Clang
// vectors (whose + and * wrap per lane and whose ?: selects per lane). Sum
// and Product are only instantiated with unsigned or floating types (signed
// integers are reduced through their unsigned twin so that overflow wraps
// instead of being UB); the static_cast undoes the promotion of uint8_t to
// int in the scalar case.
struct SumOp {
  template <typename T>
  static T Apply(T a, T b) { return static_cast<T>(a + b); }
};
struct ProductOp {
  template <typename T>
  static T Apply(T a, T b) { return static_cast<T>(a * b); }
};
struct MinOp {
  template <typename T>
  static T Apply(T a, T b) { return b < a ? b : a; }
};
struct MaxOp {
  template <typename T>
  static T Apply(T a, T b) { return a < b ? b : a; }
};

// The inner loop for the plain types. Explicit 16-byte vectors (SSE2 on
// x86-64, NEON on arm64) rather than relying on auto-vectorisation, which
// GCC does not do at -O2 for loops with a runtime trip count. Two vectors per
// iteration hide the latency of one. No calls, no branches on dtype or op.
// What ReduceLoop does to each combined value before storing it: nothing,
// or (ReduceIntoScaled) multiply it, after the operator's rounding, as a
// separate scaling pass would.
struct Unscaled {
  template <typename V>
  V operator()(V v) const { return v; }
};
struct ScaledBy {
  float factor;
  template <typename V>
  V operator()(V v) const { return v * factor; }
};

template <typename Op, typename T, typename Finish = Unscaled>
void ReduceLoop(void* accumulator, const void* incoming, size_t count,
                Finish finish = Finish()) {
  typedef T Vector __attribute__((vector_size(16)));
  constexpr size_t kLanes = sizeof(Vector) / sizeof(T);
  unsigned char* acc_bytes = static_cast<unsigned char*>(accumulator);
  const unsigned char* in_bytes = static_cast<const unsigned char*>(incoming);
  size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    Vector acc0, acc1, in0, in1;  // memcpy: the buffers need not be aligned
    std::memcpy(&acc0, acc_bytes + i * sizeof(T), sizeof(Vector));
    std::memcpy(&acc1, acc_bytes + (i + kLanes) * sizeof(T), sizeof(Vector));
    std::memcpy(&in0, in_bytes + i * sizeof(T), sizeof(Vector));
    std::memcpy(&in1, in_bytes + (i + kLanes) * sizeof(T), sizeof(Vector));
    acc0 = finish(Op::Apply(acc0, in0));
    acc1 = finish(Op::Apply(acc1, in1));
    std::memcpy(acc_bytes + i * sizeof(T), &acc0, sizeof(Vector));
    std::memcpy(acc_bytes + (i + kLanes) * sizeof(T), &acc1, sizeof(Vector));
  }
  T* acc = static_cast<T*>(accumulator);
  const T* in = static_cast<const T*>(incoming);
  for (; i < count; ++i) acc[i] = finish(Op::Apply(acc[i], in[i]));
}

// 16-bit floats: widen both operands, combine in float32, round back.
template <typename Op, float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void ReduceHalfLoop(void* accumulator, const void* incoming, size_t count) {
  uint16_t* __restrict acc = static_cast<uint16_t*>(accumulator);
  const uint16_t* __restrict in = static_cast<const uint16_t*>(incoming);
  for (size_t i = 0; i < count; ++i) {
    acc[i] = FromFloat(Op::Apply(ToFloat(acc[i]), ToFloat(in[i])));
  }
}

// Integers: Sum and Product run on the unsigned type of the same width
// (identical bits, defined wrap-around); Min and Max need the signed order.
template <typename Signed, typename Unsigned>
void ReduceInteger(void* acc, const void* in, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ReduceLoop<SumOp, Unsigned>(acc, in, count);
    case ReduceOp::kProduct: return ReduceLoop<ProductOp, Unsigned>(acc, in, count);
    case ReduceOp::kMin: return ReduceLoop<MinOp, Signed>(acc, in, count);
    case ReduceOp::kMax: return ReduceLoop<MaxOp, Signed>(acc, in, count);
  }
}

template <typename Float, typename Finish = Unscaled>
void ReduceFloat(void* acc, const void* in, size_t count, ReduceOp op,
                 Finish finish = Finish()) {
  switch (op) {
    case ReduceOp::kSum: return ReduceLoop<SumOp, Float>(acc, in, count, finish);
    case ReduceOp::kProduct: return ReduceLoop<ProductOp, Float>(acc, in, count, finish);
    case ReduceOp::kMin: return ReduceLoop<MinOp, Float>(acc, in, count, finish);
    case ReduceOp::kMax: return ReduceLoop<MaxOp, Float>(acc, in, count, finish);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void ReduceHalf(void* acc, const void* in, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ReduceHalfLoop<SumOp, ToFloat, FromFloat>(acc, in, count);
    case ReduceOp::kProduct:
      return ReduceHalfLoop<ProductOp, ToFloat, FromFloat>(acc, in, count);
    case ReduceOp::kMin:
      return ReduceHalfLoop<MinOp, ToFloat, FromFloat>(acc, in, count);
    case ReduceOp::kMax:
      return ReduceHalfLoop<MaxOp, ToFloat, FromFloat>(acc, in, count);
  }
}

bool IsKnownReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
      return true;
  }
  return false;
}

template <typename T>
T Identity(ReduceOp op) {
  using Limits = std::numeric_limits<T>;
  switch (op) {
    // -0.0, not 0.0: -0.0 + x is x for every float x, -0.0 included.
    case ReduceOp::kSum: return Limits::is_iec559 ? -T(0) : T(0);
    case ReduceOp::kProduct: return T(1);
    case ReduceOp::kMin: return Limits::has_infinity ? Limits::infinity() : Limits::max();
    case ReduceOp::kMax: return Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
  }
  return T(0);
}

template <typename T>
void FillWith(void* buffer, size_t count, T value) {
  std::fill_n(static_cast<T*>(buffer), count, value);
}

}  // namespace

Status CheckReducible(DataType dtype, ReduceOp op) {
  if (DataTypeSize(dtype) == 0 || !IsReducible(dtype)) {
    return Status::InvalidArgument(std::string("cannot reduce tensors of type ") +
                                   DataTypeName(dtype));
  }
  if (!IsKnownReduceOp(op)) {
    return Status::InvalidArgument("unknown reduce op " +
                                   std::to_string(static_cast<int>(op)));
  }
  return Status::OK();
}

void ReduceInto(void* accumulator, const void* incoming, size_t count,
                DataType dtype, ReduceOp op) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::kUInt8:
      return ReduceInteger<uint8_t, uint8_t>(accumulator, incoming, count, op);
    case DataType::kInt8:
      return ReduceInteger<int8_t, uint8_t>(accumulator, incoming, count, op);
    case DataType::kInt32:
      return ReduceInteger<int32_t, uint32_t>(accumulator, incoming, count, op);
    case DataType::kInt64:
      return ReduceInteger<int64_t, uint64_t>(accumulator, incoming, count, op);
    case DataType::kFloat16:
      if (op == ReduceOp::kSum) {  // fp16 wire compression's sums, vectorised
        return SumHalvesInto(static_cast<uint16_t*>(accumulator),
                             static_cast<const uint16_t*>(incoming), count);
      }
      return ReduceHalf<HalfToFloat, FloatToHalf>(accumulator, incoming, count, op);
    case DataType::kBFloat16:
      if (op == ReduceOp::kSum) {
        return SumBFloat16sInto(static_cast<uint16_t*>(accumulator),
                                static_cast<const uint16_t*>(incoming), count);
      }
      return ReduceHalf<BFloat16ToFloat, FloatToBFloat16>(accumulator, incoming,
                                                          count, op);
    case DataType::kFloat32:
      return ReduceFloat<float>(accumulator, incoming, count, op);
    case DataType::kFloat64:
      return ReduceFloat<double>(accumulator, incoming, count, op);
    case DataType::kBool:
      return;  // not reducible; CheckReducible rejects it
  }
}

void ReduceOutOfPlace(void* output, const void* accumulator, const void* incoming,
                      size_t count, DataType dtype, ReduceOp op, double factor) {
  if (output == accumulator && factor == 1.0) {
    return ReduceInto(output, incoming, count, dtype, op);
  }
  // Small enough that the copied block is still in L1/L2 when it is reduced.
  constexpr size_t kBlockBytes = size_t{16} << 10;
  const size_t element = DataTypeSize(dtype);
  if (element == 0) return;
  const size_t block = std::max<size_t>(1, kBlockBytes / element);
  auto* out = static_cast<unsigned char*>(output);
  const auto* acc = static_cast<const unsigned char*>(accumulator);
  const auto* in = static_cast<const unsigned char*>(incoming);
  for (size_t done = 0; done < count; done += block) {
    const size_t n = std::min(block, count - done);
    if (out != acc) std::memcpy(out + done * element, acc + done * element, n * element);
    ReduceIntoScaled(out + done * element, in + done * element, n, dtype, op, factor);
  }
}

void ReduceIntoScaled(void* accumulator, const void* incoming, size_t count,
                      DataType dtype, ReduceOp op, double factor) {
  if (count == 0) return;
  if (dtype == DataType::kFloat32 && factor != 1.0 && FloatHoldsExactly(factor)) {
    return ReduceFloat<float>(accumulator, incoming, count, op,
                              ScaledBy{static_cast<float>(factor)});
  }
  ReduceInto(accumulator, incoming, count, dtype, op);
  if (factor != 1.0) ConvertScaled(accumulator, dtype, accumulator, dtype, count, factor);
}

void FillIdentity(void* buffer, size_t count, DataType dtype, ReduceOp op) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::kUInt8: return FillWith(buffer, count, Identity<uint8_t>(op));
    case DataType::kInt8: return FillWith(buffer, count, Identity<int8_t>(op));
    case DataType::kInt32: return FillWith(buffer, count, Identity<int32_t>(op));
    case DataType::kInt64: return FillWith(buffer, count, Identity<int64_t>(op));
    case DataType::kFloat16:
      return FillWith(buffer, count, FloatToHalf(Identity<float>(op)));
    case DataType::kBFloat16:
      return FillWith(buffer, count, FloatToBFloat16(Identity<float>(op)));
    case DataType::kFloat32: return FillWith(buffer, count, Identity<float>(op));
    case DataType::kFloat64: return FillWith(buffer, count, Identity<double>(op));
    case DataType::kBool: return;  // not reducible; CheckReducible rejects it
  }
}

}  // namespace tfdist
