#include "cc/core/numeric/convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cc/core/numeric/half.h"
#include "cc/core/numeric/half_bulk.h"

namespace tfdist {

namespace {

// Storage types for the 16-bit floats, so that templates can tell them apart.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

template <typename T> double Load(const T& x) { return static_cast<double>(x); }
template <> double Load(const Half& x) { return HalfToFloat(x.bits); }
template <> double Load(const BFloat16& x) { return BFloat16ToFloat(x.bits); }

template <typename T>
T Store(double x) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(x)) return 0;
    x = std::nearbyint(x);
    if (x <= static_cast<double>(std::numeric_limits<T>::lowest())) {
      return std::numeric_limits<T>::lowest();
    }
    if (x >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(x);
  } else {
    return static_cast<T>(x);
  }
}
// x in float32, rounded to odd: toward zero, then the last bit set if
// anything was dropped. Rounding that to a 16-bit float gives the bits of
// rounding x itself once, since float32 keeps more than 16-bit's precision
// plus two bits; rounding to nearest twice would not (1 + 2^-11 + 2^-40
// became the tie 1 + 2^-11 in float32 and then 1.0 in float16, not 1 + 2^-10).
float ToFloatRoundedToOdd(double x) {
  float f = static_cast<float>(x);
  if (std::isnan(x) || static_cast<double>(f) == x) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

template <> Half Store(double x) { return Half{FloatToHalf(ToFloatRoundedToOdd(x))}; }
template <> BFloat16 Store(double x) {
  return BFloat16{FloatToBFloat16(ToFloatRoundedToOdd(x))};
}

template <typename S, typename D>
void ConvertLoop(const void* src, void* dst, size_t count, double factor) {
  const S* in = static_cast<const S*>(src);
  D* out = static_cast<D*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = Store<D>(Load(in[i]) * factor);
}

template <typename S>
void ConvertFrom(const void* src, void* dst, DataType dst_type, size_t count,
                 double factor) {
  switch (dst_type) {
    case DataType::kUInt8: return ConvertLoop<S, uint8_t>(src, dst, count, factor);
    case DataType::kInt8: return ConvertLoop<S, int8_t>(src, dst, count, factor);
    case DataType::kInt32: return ConvertLoop<S, int32_t>(src, dst, count, factor);
    case DataType::kInt64: return ConvertLoop<S, int64_t>(src, dst, count, factor);
    case DataType::kFloat16: return ConvertLoop<S, Half>(src, dst, count, factor);
    case DataType::kBFloat16: return ConvertLoop<S, BFloat16>(src, dst, count, factor);
    case DataType::kFloat32: return ConvertLoop<S, float>(src, dst, count, factor);
    case DataType::kFloat64: return ConvertLoop<S, double>(src, dst, count, factor);
    case DataType::kBool: return ConvertLoop<S, uint8_t>(src, dst, count, factor);
  }
}

// Scaling float32 by a factor that float32 holds exactly gives the same bits
// in float32 as in double precision: the product of two float32 values is
// exact in double (48 significant bits of 53, and the exponents fit), and
// both paths round it to float32 once. That covers Average over a power of
// two of ranks (and any prescale a float32 can hold); the float32 loop is
// faster than the one through double (twice the lanes, no conversions).

// Two explicit 16-byte vectors per iteration, like the reduction loops
// (reduction.cc): GCC's auto-vectorised loop is slower.
void ScaleFloats(const void* src, void* dst, size_t count, float factor) {
  typedef float Vector __attribute__((vector_size(16)));
  constexpr size_t kLanes = sizeof(Vector) / sizeof(float);
  const unsigned char* in_bytes = static_cast<const unsigned char*>(src);
  unsigned char* out_bytes = static_cast<unsigned char*>(dst);
  size_t i = 0;
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    Vector v0, v1;  // memcpy: the buffers need not be aligned, and may be the same
    std::memcpy(&v0, in_bytes + i * sizeof(float), sizeof(Vector));
    std::memcpy(&v1, in_bytes + (i + kLanes) * sizeof(float), sizeof(Vector));
    v0 *= factor;
    v1 *= factor;
    std::memcpy(out_bytes + i * sizeof(float), &v0, sizeof(Vector));
    std::memcpy(out_bytes + (i + kLanes) * sizeof(float), &v1, sizeof(Vector));
  }
  const float* in = static_cast<const float*>(src);
  float* out = static_cast<float*>(dst);
  for (; i < count; ++i) out[i] = in[i] * factor;
}

}  // namespace

bool FloatHoldsExactly(double factor) {
  return static_cast<double>(static_cast<float>(factor)) == factor;
}

DataType AccumulationType(DataType dtype) {
  return (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16)
             ? DataType::kFloat32
             : dtype;
}

void ConvertScaled(const void* src, DataType src_type, void* dst,
                   DataType dst_type, size_t count, double factor) {
  if (src_type == dst_type && factor == 1.0) {
    if (src != dst && count > 0) std::memcpy(dst, src, count * DataTypeSize(src_type));
    return;
  }
  if (src_type == DataType::kFloat32 && dst_type == DataType::kFloat32 &&
      FloatHoldsExactly(factor)) {
    return ScaleFloats(src, dst, count, static_cast<float>(factor));
  }
  if (FloatHoldsExactly(factor)) {
    // fp16/bf16 wire compression's pack and unpack: float32 arithmetic gives
    // the double-precision definition's bits here (see ScaleFloats).
    const float f = static_cast<float>(factor);
    if (src_type == DataType::kFloat32 && dst_type == DataType::kFloat16) {
      return FloatsToHalves(static_cast<const float*>(src), static_cast<uint16_t*>(dst), count, f);
    }
    if (src_type == DataType::kFloat32 && dst_type == DataType::kBFloat16) {
      return FloatsToBFloat16s(static_cast<const float*>(src), static_cast<uint16_t*>(dst),
                               count, f);
    }
    if (src_type == DataType::kFloat16 && dst_type == DataType::kFloat32) {
      return HalvesToFloats(static_cast<const uint16_t*>(src), static_cast<float*>(dst), count, f);
    }
    if (src_type == DataType::kBFloat16 && dst_type == DataType::kFloat32) {
      return BFloat16sToFloats(static_cast<const uint16_t*>(src), static_cast<float*>(dst),
                               count, f);
    }
  }
  switch (src_type) {
    case DataType::kUInt8: return ConvertFrom<uint8_t>(src, dst, dst_type, count, factor);
    case DataType::kInt8: return ConvertFrom<int8_t>(src, dst, dst_type, count, factor);
    case DataType::kInt32: return ConvertFrom<int32_t>(src, dst, dst_type, count, factor);
    case DataType::kInt64: return ConvertFrom<int64_t>(src, dst, dst_type, count, factor);
    case DataType::kFloat16: return ConvertFrom<Half>(src, dst, dst_type, count, factor);
    case DataType::kBFloat16: return ConvertFrom<BFloat16>(src, dst, dst_type, count, factor);
    case DataType::kFloat32: return ConvertFrom<float>(src, dst, dst_type, count, factor);
    case DataType::kFloat64: return ConvertFrom<double>(src, dst, dst_type, count, factor);
    case DataType::kBool: return ConvertFrom<uint8_t>(src, dst, dst_type, count, factor);
  }
}

}  // namespace tfdist
