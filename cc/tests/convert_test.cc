// ConvertScaled: float32 scaled by a factor that float32 holds exactly takes a
// float32 path; its bits must equal those of the double-precision definition.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cc/core/numeric/convert.h"
#include "cc/tests/test_harness.h"

namespace tfdist {
namespace {

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

std::vector<float> AwkwardFloats() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -3.5f, 1e-45f, -1e-44f,
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity()};
  std::mt19937 random(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  while (values.size() < 5003) {  // not a multiple of the vector width
    const uint32_t bits = any_bits(random);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isnan(x)) values.push_back(x);
  }
  return values;
}

TFDIST_TEST(ConvertScaledFloatMatchesDoublePrecision) {
  const std::vector<float> input = AwkwardFloats();
  for (double factor : {0.5, 0.25, 0.125, 1.0 / 1024, 2.0, 1024.0, std::ldexp(1.0, -140),
                        std::ldexp(1.0, 100), 3.0, 0.75, 1.0 / 3, 0.1, 1.0 + 1e-12}) {
    std::vector<float> out(input.size());
    ConvertScaled(input.data(), DataType::kFloat32, out.data(), DataType::kFloat32,
                  input.size(), factor);
    for (size_t i = 0; i < input.size(); ++i) {
      const float expected = static_cast<float>(static_cast<double>(input[i]) * factor);
      CHECK(Bits(out[i]) == Bits(expected));
    }
    // In place, as the ring scales a reduced chunk.
    std::vector<float> in_place = input;
    ConvertScaled(in_place.data(), DataType::kFloat32, in_place.data(), DataType::kFloat32,
                  in_place.size(), factor);
    CHECK(std::memcmp(in_place.data(), out.data(), out.size() * sizeof(float)) == 0);
  }
}

TFDIST_TEST(ConvertScaledFloatNaNStaysNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float out = 0;
  ConvertScaled(&nan, DataType::kFloat32, &out, DataType::kFloat32, 1, 0.5);
  CHECK(std::isnan(out));
}

// A double is rounded to a 16-bit float once: the detour through float32
// (round to nearest twice) turned values just above a tie into the tie and
// then rounded it to even, the wrong way.
TFDIST_TEST(ConvertDoubleToSixteenBitsRoundsOnce) {
  struct Case {
    double x;
    DataType to;
    uint16_t bits;
  };
  const Case cases[] = {
      {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), DataType::kFloat16, 0x3C01},
      {-(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), DataType::kFloat16, 0xBC01},
      {1.0 + std::ldexp(1.0, -11), DataType::kFloat16, 0x3C00},  // a tie: to even
      {1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40), DataType::kFloat16, 0x3C00},
      {65520.0 - std::ldexp(1.0, -30), DataType::kFloat16, 0x7BFF},  // just below overflow
      {65520.0, DataType::kFloat16, 0x7C00},
      {std::ldexp(1.0, -25) + std::ldexp(1.0, -60), DataType::kFloat16, 0x0001},  // subnormal
      {1e-300, DataType::kFloat16, 0x0000},
      {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), DataType::kBFloat16, 0x3F81},
      {1.0 + std::ldexp(1.0, -8), DataType::kBFloat16, 0x3F80},
      {1e300, DataType::kBFloat16, 0x7F80},
      {0.25, DataType::kBFloat16, 0x3E80},
  };
  for (const Case& c : cases) {
    uint16_t out = 0;
    ConvertScaled(&c.x, DataType::kFloat64, &out, c.to, 1, 1.0);
    CHECK_EQ(out, c.bits);
  }
  // Scaled in double first, then rounded once: (1 + 2^-11 + 2^-39) / 2.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -39);
  uint16_t out = 0;
  ConvertScaled(&x, DataType::kFloat64, &out, DataType::kFloat16, 1, 0.5);
  CHECK_EQ(out, 0x3801);
}

}  // namespace
}  // namespace tfdist
