#include "cc/core/convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cc/core/half.h"

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
template <> Half Store(double x) { return Half{FloatToHalf(static_cast<float>(x))}; }
template <> BFloat16 Store(double x) {
  return BFloat16{FloatToBFloat16(static_cast<float>(x))};
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

}  // namespace

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
