// fp16/bf16 wire compression: the rounding to 16 bits (scalar half.h and the
// vector loops of half_bulk.h) against an independent definition of
// round-to-nearest-even, and a compressed allreduce over the in-process
// transport against a sequential reference of the same compression, with
// its wire bytes counted by CountingTransport.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/ring_allreduce.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/numeric/half.h"
#include "cc/core/numeric/half_bulk.h"
#include "cc/core/transport/counting_transport.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AllreduceAlgorithm;
using tfdist::DataType;
using tfdist::ReduceOp;
using tfdist::Status;
using tfdist::Transport;

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint32_t ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// A binary format with `mantissa_bits` stored bits and exponents down to
// `min_exponent` (that of its smallest normal), rounded the textbook way:
// scale by the ulp at x's exponent, nearbyint (ties to even) in double,
// where every step is exact. Returns the rounded magnitude; +inf past the
// largest finite value (max_exponent).
double ReferenceRound(double magnitude, int mantissa_bits, int min_exponent, int max_exponent) {
  if (magnitude == 0) return 0;
  const int exponent = std::max(static_cast<int>(std::floor(std::log2(magnitude))), min_exponent);
  const double ulp = std::ldexp(1.0, exponent - mantissa_bits);
  const double rounded = std::nearbyint(magnitude / ulp) * ulp;
  if (rounded >= std::ldexp(1.0, max_exponent + 1)) return INFINITY;
  return rounded;
}

// The float16 bits of a magnitude ReferenceRound produced.
uint16_t HalfBitsOf(double magnitude) {
  if (std::isinf(magnitude)) return 0x7c00;
  if (magnitude < std::ldexp(1.0, -14)) {
    return static_cast<uint16_t>(magnitude / std::ldexp(1.0, -24));  // subnormal or zero
  }
  const int exponent = static_cast<int>(std::floor(std::log2(magnitude)));
  const double mantissa = magnitude / std::ldexp(1.0, exponent) - 1.0;
  return static_cast<uint16_t>(((exponent + 15) << 10) |
                               static_cast<uint16_t>(mantissa * 1024.0));
}

uint16_t ReferenceHalf(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | 0x7e00 | ((ToBits(x) >> 13) & 0x3ff);
  return sign | HalfBitsOf(ReferenceRound(std::fabs(static_cast<double>(x)), 10, -14, 15));
}

uint16_t ReferenceBFloat16(float x) {
  if (std::isnan(x)) return static_cast<uint16_t>((ToBits(x) >> 16) | 0x40);
  const double rounded = ReferenceRound(std::fabs(static_cast<double>(x)), 7, -126, 127);
  const float as_float = static_cast<float>(std::signbit(x) ? -rounded : rounded);  // exact
  return static_cast<uint16_t>(ToBits(as_float) >> 16);
}

// Floats that exercise the rounding: every half and bfloat16 value and the
// midpoints between neighbours (ties) with one ulp of float32 either side,
// specials, and random bit patterns.
std::vector<float> RoundingCases() {
  std::vector<float> cases = {0.0f, -0.0f, INFINITY, -INFINITY,
                              std::numeric_limits<float>::quiet_NaN(),
                              FromBits(0x7f800001u), FromBits(0xffc12345u),
                              65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, 2.9802322e-8f,
                              5.9604645e-8f, std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::denorm_min()};
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = tfdist::HalfToFloat(static_cast<uint16_t>(h));
    const float b = tfdist::HalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      cases.push_back(x);
      cases.push_back(-x);
    }
  }
  for (uint32_t h = 0; h < 0x7f80; h += 3) {
    const uint32_t low = h << 16;
    const uint32_t mid = low | 0x8000u;
    for (uint32_t bits : {low, mid, mid - 1, mid + 1}) {
      cases.push_back(FromBits(bits));
      cases.push_back(FromBits(bits | 0x80000000u));
    }
  }
  std::mt19937 random(11);
  for (int i = 0; i < 200003; ++i) cases.push_back(FromBits(random()));
  return cases;
}

TFDIST_TEST(Float16RoundingMatchesTheReferenceInScalarAndVectorLoops) {
  const std::vector<float> cases = RoundingCases();
  std::vector<uint16_t> bulk(cases.size());
  tfdist::FloatsToHalves(cases.data(), bulk.data(), cases.size(), 1.0f);
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
    const uint16_t expected = ReferenceHalf(cases[i]);
    const uint16_t scalar = tfdist::FloatToHalf(cases[i]);
    if (scalar != expected || bulk[i] != expected) {
      ++failures;
      CHECK_EQ_MSG(scalar, expected, "FloatToHalf of bits " << std::hex << ToBits(cases[i]));
      CHECK_EQ_MSG(bulk[i], expected, "FloatsToHalves of bits " << std::hex << ToBits(cases[i]));
    }
  }
}

TFDIST_TEST(BFloat16RoundingMatchesTheReferenceInScalarAndVectorLoops) {
  const std::vector<float> cases = RoundingCases();
  std::vector<uint16_t> bulk(cases.size());
  tfdist::FloatsToBFloat16s(cases.data(), bulk.data(), cases.size(), 1.0f);
  int failures = 0;
  for (size_t i = 0; i < cases.size() && failures < 5; ++i) {
    const uint16_t expected = ReferenceBFloat16(cases[i]);
    const uint16_t scalar = tfdist::FloatToBFloat16(cases[i]);
    if (scalar != expected || bulk[i] != expected) {
      ++failures;
      CHECK_EQ_MSG(scalar, expected, "FloatToBFloat16 of bits " << std::hex << ToBits(cases[i]));
      CHECK_EQ_MSG(bulk[i], expected, "FloatsToBFloat16s of bits " << std::hex
                                                                     << ToBits(cases[i]));
    }
  }
}

// Every 16-bit pattern widens exactly (the value a double computes from the
// fields) and, but for NaNs, narrows back to itself; NaNs stay NaNs of the
// same sign. Scalar and vector loops agree on all of them.
TFDIST_TEST(SixteenBitValuesRoundTripExactly) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> half_wide(all.size()), bf_wide(all.size());
  tfdist::HalvesToFloats(all.data(), half_wide.data(), all.size(), 1.0f);
  tfdist::BFloat16sToFloats(all.data(), bf_wide.data(), all.size(), 1.0f);
  std::vector<uint16_t> half_back(all.size()), bf_back(all.size());
  tfdist::FloatsToHalves(half_wide.data(), half_back.data(), all.size(), 1.0f);
  tfdist::FloatsToBFloat16s(bf_wide.data(), bf_back.data(), all.size(), 1.0f);
  int failures = 0;
  for (uint32_t h = 0; h < 65536 && failures < 5; ++h) {
    const bool sign = (h & 0x8000) != 0;
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const bool half_nan = exponent == 0x1f && mantissa != 0;
    const bool bf_nan = ((h >> 7) & 0xff) == 0xff && (h & 0x7f) != 0;
    bool ok = ToBits(half_wide[h]) == ToBits(tfdist::HalfToFloat(static_cast<uint16_t>(h))) &&
              ToBits(bf_wide[h]) == ToBits(tfdist::BFloat16ToFloat(static_cast<uint16_t>(h)));
    if (half_nan) {
      ok = ok && std::isnan(half_wide[h]) && std::signbit(half_wide[h]) == sign &&
           (half_back[h] | 0x200) == (h | 0x200);
    } else {
      const double value = exponent == 0x1f ? INFINITY
                           : exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1024 + mantissa, int(exponent) - 25);
      ok = ok && half_wide[h] == (sign ? -value : value) && half_back[h] == h;
    }
    ok = ok && (bf_nan ? std::isnan(bf_wide[h]) && (bf_back[h] | 0x40) == (h | 0x40)
                       : bf_back[h] == h);
    if (!ok) {
      ++failures;
      CHECK_EQ_MSG(h, 0xffffffffu, "16-bit pattern does not round-trip");
    }
  }
}

// Sums through float32 agree between the vector loop and half.h.
TFDIST_TEST(SixteenBitSumsAgreeWithScalarDefinition) {
  std::mt19937 random(5);
  std::vector<uint16_t> a(10007), b(10007);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint16_t>(random());
    b[i] = static_cast<uint16_t>(random());
  }
  std::vector<uint16_t> half = a, bf = a;
  tfdist::SumHalvesInto(half.data(), b.data(), a.size());
  tfdist::SumBFloat16sInto(bf.data(), b.data(), a.size());
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 5; ++i) {
    const float hs = tfdist::HalfToFloat(a[i]) + tfdist::HalfToFloat(b[i]);
    const float bs = tfdist::BFloat16ToFloat(a[i]) + tfdist::BFloat16ToFloat(b[i]);
    const bool ok = (std::isnan(hs) ? std::isnan(tfdist::HalfToFloat(half[i]))
                                    : half[i] == tfdist::FloatToHalf(hs)) &&
                    (std::isnan(bs) ? std::isnan(tfdist::BFloat16ToFloat(bf[i]))
                                    : bf[i] == tfdist::FloatToBFloat16(bs));
    if (!ok) {
      ++failures;
      CHECK_EQ_MSG(i, size_t{0}, "16-bit sum differs");
    }
  }
}

// The executor's compressed allreduce, step by step on P threads: pack
// float32 to 16 bits with Average's 1/P, ring-allreduce the 16-bit buffer
// through a CountingTransport, widen. Against a sequential reference of the
// same compression: inputs that are small multiples of P make every partial
// sum exact, so the results must match bit for bit; and the ring sent
// 2(P-1)/P of the 16-bit buffer per rank.
TFDIST_TEST(CompressedRingAllreduceMatchesSequentialReference) {
  for (DataType wire : {DataType::kFloat16, DataType::kBFloat16}) {
    for (int size : {2, 3, 4, 5}) {
      const size_t count = 60 * 1001;  // divisible by every P here
      std::vector<std::vector<float>> inputs(size, std::vector<float>(count));
      std::vector<float> expected(count, 0.0f);
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < count; ++i) {
          inputs[r][i] = static_cast<float>(size * (static_cast<int>((i * 7 + r * 13) % 31) - 15));
          expected[i] += inputs[r][i] / size;
        }
      }
      std::vector<std::vector<float>> outputs(size, std::vector<float>(count));
      std::vector<std::atomic<uint64_t>> sent(size);
      const std::vector<Status> statuses =
          tfdist::RunOnThreads(size, [&](Transport& transport) {
            const int r = transport.rank();
            tfdist::CountingTransport counting(transport, sent[r]);
            std::vector<uint16_t> packed(count);
            tfdist::ConvertScaled(inputs[r].data(), DataType::kFloat32, packed.data(), wire,
                                  count, 1.0 / size);
            Status s = tfdist::RunAllreduce(AllreduceAlgorithm::kRing, counting, packed.data(),
                                            count, wire, ReduceOp::kSum);
            tfdist::ConvertScaled(packed.data(), wire, outputs[r].data(), DataType::kFloat32,
                                  count, 1.0);
            return s;
          });
      const std::string label = std::string(tfdist::DataTypeName(wire)) +
                                " P=" + std::to_string(size);
      for (int r = 0; r < size; ++r) {
        CHECK_EQ_MSG(DescribeStatus(statuses[r]), std::string("OK"), label);
        CHECK_EQ_MSG(std::memcmp(outputs[r].data(), expected.data(), count * sizeof(float)), 0,
                     label << " rank " << r);
        CHECK_EQ_MSG(sent[r].load(), 2 * (size - 1) * count * 2 / size,
                     label << " rank " << r << " bytes sent");
      }
    }
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The ring that rounds and widens segment by segment (what the executor
// runs for one large compressed tensor) gives the same bits as packing the
// whole input, ring-allreducing the 16-bit buffer and widening it, on random
// inputs, with tiny segments so that chunks span several, in and out of place.
TFDIST_TEST(FusedCastRingMatchesPackRingUnpack) {
  for (DataType wire : {DataType::kFloat16, DataType::kBFloat16}) {
    for (int size : {1, 2, 3, 4}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
        std::vector<std::vector<float>> inputs(size, std::vector<float>(count));
        std::mt19937 random(static_cast<unsigned>(count * 10 + size));
        std::normal_distribution<float> normal(0.0f, 100.0f);
        for (auto& input : inputs) {
          for (float& x : input) x = normal(random);
        }
        std::vector<std::vector<float>> fused(size, std::vector<float>(count));
        std::vector<std::vector<float>> reference(size, std::vector<float>(count));
        std::vector<std::vector<float>> in_place = inputs;
        const double scale = 1.0 / size;
        const std::vector<Status> statuses =
            tfdist::RunOnThreads(size, [&](Transport& transport) {
              const int r = transport.rank();
              std::vector<uint16_t> wire_buffer(count + 1);
              TFDIST_RETURN_IF_ERROR(tfdist::RingAllreduceCompressed(
                  transport, inputs[r].data(), DataType::kFloat32, scale, wire_buffer.data(),
                  wire, fused[r].data(), count, ReduceOp::kSum, 64));
              TFDIST_RETURN_IF_ERROR(tfdist::RingAllreduceCompressed(
                  transport, in_place[r].data(), DataType::kFloat32, scale, wire_buffer.data(),
                  wire, in_place[r].data(), count, ReduceOp::kSum, 64));
              tfdist::ConvertScaled(inputs[r].data(), DataType::kFloat32, wire_buffer.data(),
                                    wire, count, scale);
              TFDIST_RETURN_IF_ERROR(tfdist::RunAllreduce(AllreduceAlgorithm::kRing, transport,
                                                          wire_buffer.data(), count, wire,
                                                          ReduceOp::kSum));
              tfdist::ConvertScaled(wire_buffer.data(), wire, reference[r].data(),
                                    DataType::kFloat32, count, 1.0);
              return Status::OK();
            });
        const std::string label = std::string(tfdist::DataTypeName(wire)) + " P=" +
                                  std::to_string(size) + " count=" + std::to_string(count);
        for (int r = 0; r < size; ++r) {
          CHECK_EQ_MSG(DescribeStatus(statuses[r]), std::string("OK"), label);
          CHECK_EQ_MSG(SameBits(fused[r], reference[r]), true, label << " rank " << r);
          CHECK_EQ_MSG(SameBits(in_place[r], reference[r]), true,
                       label << " in place, rank " << r);
          CHECK_EQ_MSG(SameBits(fused[r], fused[0]), true, label << " rank " << r << " vs rank 0");
        }
      }
    }
  }
}

}  // namespace
}  // namespace tfdist_test
