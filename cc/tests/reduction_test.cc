// ReduceInto on hand-checked values (wrap-around, signed order, rounding of
// the 16-bit floats) and the half/bfloat16 conversions it relies on.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/half.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::DataType;
using tfdist::ReduceOp;

template <typename T>
std::vector<T> Reduced(std::vector<T> accumulator, const std::vector<T>& incoming,
                       DataType dtype, ReduceOp op) {
  tfdist::ReduceInto(accumulator.data(), incoming.data(), accumulator.size(),
                     dtype, op);
  return accumulator;
}

// Round to nearest even, computed independently of the code under test:
// pick the nearer of the two neighbouring representable values in double.
uint16_t ReferenceBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t below = static_cast<uint16_t>(bits >> 16);
  const uint16_t above = static_cast<uint16_t>(below + 1);
  const double low = tfdist::BFloat16ToFloat(below);
  const double high = tfdist::BFloat16ToFloat(above);
  const double x = value;
  const double to_low = std::fabs(x - low);
  const double to_high = std::fabs(high - x);
  if (to_low < to_high) return below;
  if (to_high < to_low) return above;
  return (below & 1) ? above : below;
}

bool SameHalf(uint16_t a, uint16_t b) {
  const bool a_nan = (a & 0x7c00) == 0x7c00 && (a & 0x3ff) != 0;
  const bool b_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
  return a_nan || b_nan ? a_nan == b_nan : a == b;
}

}  // namespace

TFDIST_TEST(ReduceIntegersWrapAndCompareSigned) {
  CHECK((Reduced<int8_t>({127, -128, 5}, {1, -1, -7}, DataType::kInt8,
                         ReduceOp::kSum) == std::vector<int8_t>{-128, 127, -2}));
  CHECK((Reduced<uint8_t>({255, 200}, {1, 100}, DataType::kUInt8,
                          ReduceOp::kSum) == std::vector<uint8_t>{0, 44}));
  CHECK((Reduced<uint8_t>({200, 16}, {100, 16}, DataType::kUInt8,
                          ReduceOp::kProduct) == std::vector<uint8_t>{32, 0}));
  CHECK((Reduced<int8_t>({-128, 100}, {-1, 2}, DataType::kInt8,
                         ReduceOp::kProduct) == std::vector<int8_t>{-128, -56}));
  const int32_t int32_max = std::numeric_limits<int32_t>::max();
  const int32_t int32_min = std::numeric_limits<int32_t>::min();
  CHECK((Reduced<int32_t>({int32_max, 65536}, {1, 65536}, DataType::kInt32,
                          ReduceOp::kSum)[0] == int32_min));
  CHECK((Reduced<int32_t>({65536}, {65536}, DataType::kInt32,
                          ReduceOp::kProduct)[0] == 0));
  const int64_t int64_min = std::numeric_limits<int64_t>::min();
  CHECK((Reduced<int64_t>({int64_min}, {-1}, DataType::kInt64,
                          ReduceOp::kProduct)[0] == int64_min));
  CHECK((Reduced<int64_t>({int64_min, 3}, {-1, -4}, DataType::kInt64,
                          ReduceOp::kSum) ==
         std::vector<int64_t>{std::numeric_limits<int64_t>::max(), -1}));
  // Signed types order signed; uint8 orders unsigned.
  CHECK((Reduced<int8_t>({-128, 127, 0}, {127, -128, -1}, DataType::kInt8,
                         ReduceOp::kMin) == std::vector<int8_t>{-128, -128, -1}));
  CHECK((Reduced<int8_t>({-128, 127, 0}, {127, -128, -1}, DataType::kInt8,
                         ReduceOp::kMax) == std::vector<int8_t>{127, 127, 0}));
  CHECK((Reduced<uint8_t>({200, 3}, {100, 250}, DataType::kUInt8,
                          ReduceOp::kMin) == std::vector<uint8_t>{100, 3}));
  CHECK((Reduced<int32_t>({-5, 7}, {3, -9}, DataType::kInt32, ReduceOp::kMax) ==
         std::vector<int32_t>{3, 7}));
  CHECK((Reduced<int64_t>({-5, 7}, {3, -9}, DataType::kInt64, ReduceOp::kMin) ==
         std::vector<int64_t>{-5, -9}));
}

TFDIST_TEST(ReduceFloats) {
  CHECK((Reduced<float>({1.5f, -2.0f, 0.25f}, {2.25f, 3.0f, -0.25f},
                        DataType::kFloat32, ReduceOp::kSum) ==
         std::vector<float>{3.75f, 1.0f, 0.0f}));
  CHECK((Reduced<double>({1.5, -2.0}, {-4.0, 0.5}, DataType::kFloat64,
                         ReduceOp::kProduct) == std::vector<double>{-6.0, -1.0}));
  CHECK((Reduced<float>({1.0f, -3.0f}, {-2.0f, 4.0f}, DataType::kFloat32,
                        ReduceOp::kMin) == std::vector<float>{-2.0f, -3.0f}));
  CHECK((Reduced<double>({1.0, -3.0}, {-2.0, 4.0}, DataType::kFloat64,
                         ReduceOp::kMax) == std::vector<double>{1.0, 4.0}));
  // Sizes that are not multiples of any vector width take the scalar tail.
  std::vector<float> accumulator(37), incoming(37), expected(37);
  for (int i = 0; i < 37; ++i) {
    accumulator[i] = static_cast<float>(i);
    incoming[i] = static_cast<float>(100 - 3 * i);
    expected[i] = accumulator[i] + incoming[i];
  }
  CHECK(Reduced(accumulator, incoming, DataType::kFloat32, ReduceOp::kSum) ==
        expected);
}

TFDIST_TEST(ReduceSixteenBitFloatsRoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between the halves 1 (even) and 1 + 2^-10 (odd).
  const uint16_t one = 0x3c00;
  const uint16_t one_ulp_up = 0x3c01;
  const uint16_t two_pow_minus_11 = tfdist::FloatToHalf(std::ldexp(1.0f, -11));
  CHECK_EQ(tfdist::HalfToFloat(two_pow_minus_11), std::ldexp(1.0f, -11));
  CHECK((Reduced<uint16_t>({one, one_ulp_up}, {two_pow_minus_11, two_pow_minus_11},
                           DataType::kFloat16, ReduceOp::kSum) ==
         std::vector<uint16_t>{0x3c00, 0x3c02}));
  CHECK((Reduced<uint16_t>({0x3e00 /*1.5*/, 0x7bff /*65504*/},
                           {0x4000 /*2*/, 0x7bff}, DataType::kFloat16,
                           ReduceOp::kProduct) ==
         std::vector<uint16_t>{0x4200 /*3*/, 0x7c00 /*inf*/}));
  CHECK((Reduced<uint16_t>({0x3c00, 0xbc00}, {0xc000, 0x4000},
                           DataType::kFloat16, ReduceOp::kMin) ==
         std::vector<uint16_t>{0xc000, 0xbc00}));
  // bfloat16: 1 + 2^-8 lies between 1 (0x3f80, even) and 0x3f81.
  const uint16_t b_two_pow_minus_8 = tfdist::FloatToBFloat16(std::ldexp(1.0f, -8));
  CHECK((Reduced<uint16_t>({0x3f80, 0x3f81}, {b_two_pow_minus_8, b_two_pow_minus_8},
                           DataType::kBFloat16, ReduceOp::kSum) ==
         std::vector<uint16_t>{0x3f80, 0x3f82}));
  CHECK((Reduced<uint16_t>({0x4040 /*3*/}, {0xc000 /*-2*/}, DataType::kBFloat16,
                           ReduceOp::kMax) == std::vector<uint16_t>{0x4040}));
}

TFDIST_TEST(CheckReducibleRejectsBoolAndUnknownOps) {
  CHECK_OK(tfdist::CheckReducible(DataType::kBFloat16, ReduceOp::kProduct));
  CHECK(tfdist::CheckReducible(DataType::kBool, ReduceOp::kSum).code() ==
        tfdist::StatusCode::kInvalidArgument);
  CHECK(tfdist::CheckReducible(DataType::kInt32, static_cast<ReduceOp>(17))
            .code() == tfdist::StatusCode::kInvalidArgument);
  CHECK(tfdist::CheckReducible(static_cast<DataType>(42), ReduceOp::kSum)
            .code() == tfdist::StatusCode::kInvalidArgument);
}

TFDIST_TEST(HalfConversionKnownValues) {
  CHECK_EQ(tfdist::FloatToHalf(1.0f), uint16_t{0x3c00});
  CHECK_EQ(tfdist::FloatToHalf(-2.0f), uint16_t{0xc000});
  CHECK_EQ(tfdist::FloatToHalf(65504.0f), uint16_t{0x7bff});
  CHECK_EQ(tfdist::FloatToHalf(65519.99f), uint16_t{0x7bff});
  CHECK_EQ(tfdist::FloatToHalf(65520.0f), uint16_t{0x7c00});
  CHECK_EQ(tfdist::FloatToHalf(-1e9f), uint16_t{0xfc00});
  CHECK_EQ(tfdist::FloatToHalf(std::ldexp(1.0f, -24)), uint16_t{0x0001});
  CHECK_EQ(tfdist::FloatToHalf(std::ldexp(1.0f, -25)), uint16_t{0x0000});
  CHECK_EQ(tfdist::FloatToHalf(std::ldexp(3.0f, -25)), uint16_t{0x0002});
  CHECK_EQ(tfdist::FloatToHalf(std::ldexp(1.0f, -14)), uint16_t{0x0400});
  CHECK_EQ(tfdist::FloatToHalf(-0.0f), uint16_t{0x8000});
  CHECK_EQ(tfdist::HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  CHECK_EQ(tfdist::HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  CHECK(std::isnan(tfdist::HalfToFloat(0x7e00)));
  CHECK(std::isnan(tfdist::HalfToFloat(
      tfdist::FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  CHECK_EQ(tfdist::FloatToBFloat16(1.0f), uint16_t{0x3f80});
  CHECK_EQ(tfdist::FloatToBFloat16(std::numeric_limits<float>::max()),
           uint16_t{0x7f80});
  CHECK(std::isnan(tfdist::BFloat16ToFloat(
      tfdist::FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

// Every half value survives half -> float -> half, and around every half the
// float -> half rounding matches an independent oracle: the compiler's own
// _Float16 conversion where available, else nearest-even by hand.
TFDIST_TEST(HalfConversionExhaustive) {
  int round_trip_failures = 0;
  int rounding_failures = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    const float value = tfdist::HalfToFloat(half);
    if (!SameHalf(tfdist::FloatToHalf(value), half)) ++round_trip_failures;
    if (std::isnan(value) || std::isinf(value)) continue;
#if defined(__FLT16_MANT_DIG__)
    CHECK_EQ(value, static_cast<float>(static_cast<_Float16>(value)));
    // Probe the neighbourhood: the value, one float ulp either side, and the
    // exact midpoints to both neighbouring halves (with one ulp either side).
    const uint16_t next = static_cast<uint16_t>(half + 1);
    const float probes_center[] = {
        value, value + (tfdist::HalfToFloat(next) - value) / 2.0f};
    for (float center : probes_center) {
      if (!std::isfinite(center)) continue;
      const float probes[] = {center,
                              std::nextafter(center, std::numeric_limits<float>::infinity()),
                              std::nextafter(center, -std::numeric_limits<float>::infinity())};
      for (float probe : probes) {
        const _Float16 oracle = static_cast<_Float16>(probe);
        uint16_t oracle_bits;
        std::memcpy(&oracle_bits, &oracle, sizeof(oracle_bits));
        if (!SameHalf(tfdist::FloatToHalf(probe), oracle_bits)) {
          if (++rounding_failures <= 5) {
            CHECK_EQ_MSG(tfdist::FloatToHalf(probe), oracle_bits,
                         "probe " << probe);
          }
        }
      }
    }
#endif
  }
  CHECK_EQ(round_trip_failures, 0);
  CHECK_EQ(rounding_failures, 0);
}

TFDIST_TEST(BFloat16ConversionExhaustive) {
  int failures = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t bfloat = static_cast<uint16_t>(bits);
    const float value = tfdist::BFloat16ToFloat(bfloat);
    if (std::isnan(value)) {
      if (!std::isnan(tfdist::BFloat16ToFloat(tfdist::FloatToBFloat16(value)))) {
        ++failures;
      }
      continue;
    }
    if (tfdist::FloatToBFloat16(value) != bfloat) ++failures;
    if (std::isinf(value) || (bits & 0x7fff) == 0x7f7f) continue;
    // Just above, at, and just below the midpoint to the next bfloat16.
    uint32_t value_bits;
    std::memcpy(&value_bits, &value, sizeof(value_bits));
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x0001u, 0xffffu}) {
      uint32_t probe_bits = value_bits | low;
      float probe;
      std::memcpy(&probe, &probe_bits, sizeof(probe));
      if (tfdist::FloatToBFloat16(probe) != ReferenceBFloat16(probe)) {
        if (++failures <= 5) {
          CHECK_EQ_MSG(tfdist::FloatToBFloat16(probe), ReferenceBFloat16(probe),
                       "probe bits " << probe_bits);
        }
      }
    }
  }
  CHECK_EQ(failures, 0);
}

}  // namespace tfdist_test

namespace tfdist_test {
namespace {

// Reducing with FillIdentity's buffer, on either side, leaves every value's
// bits as they were: a joined rank's stand-in changes nothing.
template <typename T>
void CheckIdentity(DataType dtype, const std::vector<T>& values) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<T> identity(values.size());
    tfdist::FillIdentity(identity.data(), identity.size(), dtype, op);
    std::vector<T> left = values;
    tfdist::ReduceInto(left.data(), identity.data(), values.size(), dtype, op);
    std::vector<T> right = identity;
    tfdist::ReduceInto(right.data(), values.data(), values.size(), dtype, op);
    CHECK_EQ_MSG(std::memcmp(left.data(), values.data(), values.size() * sizeof(T)), 0,
                 tfdist::DataTypeName(dtype) << " " << tfdist::ReduceOpName(op));
    CHECK_EQ_MSG(std::memcmp(right.data(), values.data(), values.size() * sizeof(T)), 0,
                 tfdist::DataTypeName(dtype) << " " << tfdist::ReduceOpName(op));
  }
}

template <typename T>
std::vector<T> Extremes() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {T(0), T(1), T(2), L::max(), L::lowest(), L::min()};
  if (L::is_signed) v.push_back(T(-1));
  if (L::is_iec559) {
    v.insert(v.end(), {-T(0), L::infinity(), -L::infinity(), L::denorm_min(), T(0.1)});
  }
  return v;
}

std::vector<uint16_t> HalfExtremes(uint16_t (*from_float)(float)) {
  std::vector<uint16_t> v;
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, -65504.0f, 1e-7f, 0.1f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
    v.push_back(from_float(f));
  }
  return v;
}

}  // namespace

TFDIST_TEST(FillIdentityIsNeutralForEveryTypeAndOp) {
  CheckIdentity(DataType::kUInt8, Extremes<uint8_t>());
  CheckIdentity(DataType::kInt8, Extremes<int8_t>());
  CheckIdentity(DataType::kInt32, Extremes<int32_t>());
  CheckIdentity(DataType::kInt64, Extremes<int64_t>());
  CheckIdentity(DataType::kFloat32, Extremes<float>());
  CheckIdentity(DataType::kFloat64, Extremes<double>());
  CheckIdentity(DataType::kFloat16, HalfExtremes(tfdist::FloatToHalf));
  CheckIdentity(DataType::kBFloat16, HalfExtremes(tfdist::FloatToBFloat16));
}

}  // namespace tfdist_test

namespace tfdist_test {
namespace {

// `count` elements of `dtype` from a fixed, varied pattern: signs, zeros,
// values that overflow when combined, fractions that round.
std::vector<unsigned char> Pattern(DataType dtype, size_t count, int seed) {
  const size_t element = tfdist::DataTypeSize(dtype);
  std::vector<unsigned char> bytes(count * element);
  for (size_t i = 0; i < count; ++i) {
    const double x = std::sin(static_cast<double>(i * 7 + seed)) *
                     (i % 5 == 0 ? 3.0e38 : 123.456);
    unsigned char* out = bytes.data() + i * element;
    switch (dtype) {
      case DataType::kFloat32: { const float v = i % 11 == 3 ? -0.0f : static_cast<float>(x);
                                 std::memcpy(out, &v, sizeof v); break; }
      case DataType::kFloat64: { std::memcpy(out, &x, sizeof x); break; }
      case DataType::kFloat16: { const uint16_t v = tfdist::FloatToHalf(static_cast<float>(x / 1e36));
                                 std::memcpy(out, &v, sizeof v); break; }
      case DataType::kInt32: { const int32_t v = static_cast<int32_t>(std::fmod(x, 2.0e9));
                               std::memcpy(out, &v, sizeof v); break; }
      default: break;
    }
  }
  return bytes;
}

}  // namespace

// The fused pass must give exactly what ReduceInto followed by ConvertScaled
// gives, for the factors it fuses and those it does not.
TFDIST_TEST(ReduceIntoScaledMatchesReduceThenScaleBitForBit) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
      for (double factor : {1.0, 0.5, 0.25, 1.0 / 3.0, 8.0}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1001}}) {
          std::vector<unsigned char> fused = Pattern(dtype, count, 1);
          std::vector<unsigned char> separate = fused;
          const std::vector<unsigned char> incoming = Pattern(dtype, count, 2);
          tfdist::ReduceIntoScaled(fused.data(), incoming.data(), count, dtype, op, factor);
          tfdist::ReduceInto(separate.data(), incoming.data(), count, dtype, op);
          tfdist::ConvertScaled(separate.data(), dtype, separate.data(), dtype, count, factor);
          CHECK_EQ_MSG(fused == separate, true,
                       tfdist::DataTypeName(dtype) << " op " << static_cast<int>(op)
                                                   << " factor " << factor << " count " << count);
        }
      }
    }
  }
}

}  // namespace tfdist_test

namespace tfdist_test {

// Out of place must give ReduceInto's bits in the output, across the
// cache-sized blocks it works in, and leave both operands as they were.
TFDIST_TEST(ReduceOutOfPlaceMatchesReduceIntoBitForBit) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{9}, size_t{4095}, size_t{4096},
                           size_t{4097}, size_t{50001}}) {
        const std::vector<unsigned char> accumulator = Pattern(dtype, count, 1);
        const std::vector<unsigned char> incoming = Pattern(dtype, count, 2);
        std::vector<unsigned char> expected = accumulator;
        tfdist::ReduceInto(expected.data(), incoming.data(), count, dtype, op);
        std::vector<unsigned char> output(accumulator.size(), 0xAB);
        tfdist::ReduceOutOfPlace(output.data(), accumulator.data(), incoming.data(), count,
                                 dtype, op);
        const std::string label = std::string(tfdist::DataTypeName(dtype)) + " op " +
                                  std::to_string(static_cast<int>(op)) + " count " +
                                  std::to_string(count);
        CHECK_EQ_MSG(output == expected, true, label);
        CHECK_EQ_MSG(accumulator == Pattern(dtype, count, 1), true, label << " accumulator");
        CHECK_EQ_MSG(incoming == Pattern(dtype, count, 2), true, label << " incoming");
        // output == accumulator is ReduceInto itself.
        std::vector<unsigned char> in_place = accumulator;
        tfdist::ReduceOutOfPlace(in_place.data(), in_place.data(), incoming.data(), count,
                                 dtype, op);
        CHECK_EQ_MSG(in_place == expected, true, label << " in place");
      }
    }
  }
}

}  // namespace tfdist_test
