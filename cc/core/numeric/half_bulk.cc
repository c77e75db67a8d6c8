#include "cc/core/numeric/half_bulk.h"

#include <cstring>

#include "cc/core/numeric/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TFDIST_HAVE_F16C_PATH 1
#endif

namespace tfdist {
namespace {

// bfloat16 is float32's top half, so its conversions are integer arithmetic
// on eight lanes at a time (GCC/Clang vector extensions; SSE2 or NEON code).
typedef uint32_t Bits8 __attribute__((vector_size(32)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef uint16_t Halves8 __attribute__((vector_size(16)));

// Vectors by pointer: passing 32-byte vectors by value warns about the ABI
// when AVX is not enabled.
inline __attribute__((always_inline)) void WidenBFloat16s(const uint16_t* in, Floats8* out) {
  Halves8 h;
  std::memcpy(&h, in, sizeof h);
  const Bits8 bits = __builtin_convertvector(h, Bits8) << 16;
  std::memcpy(out, &bits, sizeof *out);
}

// FloatToBFloat16 (half.h) on eight lanes.
inline __attribute__((always_inline)) void NarrowToBFloat16s(const Floats8* f, uint16_t* out) {
  Bits8 bits;
  std::memcpy(&bits, f, sizeof bits);
  const Bits8 magnitude = bits & 0x7fffffffu;
  const Bits8 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const Bits8 quiet_nan = (bits >> 16) | 0x40u;
  const Bits8 result = magnitude > 0x7f800000u ? quiet_nan : rounded;
  const Halves8 h = __builtin_convertvector(result, Halves8);
  std::memcpy(out, &h, sizeof h);
}

#ifdef TFDIST_HAVE_F16C_PATH
bool HasF16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

__attribute__((target("avx,f16c"))) size_t FloatsToHalvesF16c(const float* in, uint16_t* out,
                                                              size_t count, float factor) {
  const __m256 scale = _mm256_set1_ps(factor);
  const bool scaled = factor != 1.0f;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 v = _mm256_loadu_ps(in + i);
    if (scaled) v = _mm256_mul_ps(v, scale);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t HalvesToFloatsF16c(const uint16_t* in, float* out,
                                                              size_t count, float factor) {
  const __m256 scale = _mm256_set1_ps(factor);
  const bool scaled = factor != 1.0f;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if (scaled) v = _mm256_mul_ps(v, scale);
    _mm256_storeu_ps(out + i, v);
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t SumHalvesF16c(uint16_t* acc, const uint16_t* in,
                                                         size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + i),
                     _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}
#endif  // TFDIST_HAVE_F16C_PATH

}  // namespace

void FloatsToHalves(const float* in, uint16_t* out, size_t count, float factor) {
  size_t i = 0;
#ifdef TFDIST_HAVE_F16C_PATH
  if (HasF16c()) i = FloatsToHalvesF16c(in, out, count, factor);
#endif
  const bool scaled = factor != 1.0f;
  for (; i < count; ++i) out[i] = FloatToHalf(scaled ? in[i] * factor : in[i]);
}

void HalvesToFloats(const uint16_t* in, float* out, size_t count, float factor) {
  size_t i = 0;
#ifdef TFDIST_HAVE_F16C_PATH
  if (HasF16c()) i = HalvesToFloatsF16c(in, out, count, factor);
#endif
  const bool scaled = factor != 1.0f;
  for (; i < count; ++i) out[i] = scaled ? HalfToFloat(in[i]) * factor : HalfToFloat(in[i]);
}

void SumHalvesInto(uint16_t* accumulator, const uint16_t* incoming, size_t count) {
  size_t i = 0;
#ifdef TFDIST_HAVE_F16C_PATH
  if (HasF16c()) i = SumHalvesF16c(accumulator, incoming, count);
#endif
  for (; i < count; ++i) {
    accumulator[i] = FloatToHalf(HalfToFloat(accumulator[i]) + HalfToFloat(incoming[i]));
  }
}

namespace {

// The bfloat16 loops, compiled twice: for the baseline and, where the CPU
// has it, for AVX2 (eight lanes per instruction instead of four; with the
// baseline build alone, bf16's conversions cost more than the bytes they
// save on a large allreduce).
#define TFDIST_BFLOAT16_LOOPS(SUFFIX, ATTRIBUTE)                                          \
  ATTRIBUTE void FloatsToBFloat16s##SUFFIX(const float* in, uint16_t* out, size_t count,  \
                                           float factor) {                                \
    const bool scaled = factor != 1.0f;                                                   \
    size_t i = 0;                                                                         \
    for (; i + 8 <= count; i += 8) {                                                      \
      Floats8 f;                                                                          \
      std::memcpy(&f, in + i, sizeof f);                                                  \
      if (scaled) f *= factor;                                                            \
      NarrowToBFloat16s(&f, out + i);                                                     \
    }                                                                                     \
    for (; i < count; ++i) out[i] = FloatToBFloat16(scaled ? in[i] * factor : in[i]);     \
  }                                                                                       \
  ATTRIBUTE void BFloat16sToFloats##SUFFIX(const uint16_t* in, float* out, size_t count,  \
                                           float factor) {                                \
    const bool scaled = factor != 1.0f;                                                   \
    size_t i = 0;                                                                         \
    for (; i + 8 <= count; i += 8) {                                                      \
      Floats8 f;                                                                          \
      WidenBFloat16s(in + i, &f);                                                         \
      if (scaled) f *= factor;                                                            \
      std::memcpy(out + i, &f, sizeof f);                                                 \
    }                                                                                     \
    for (; i < count; ++i) {                                                              \
      out[i] = scaled ? BFloat16ToFloat(in[i]) * factor : BFloat16ToFloat(in[i]);         \
    }                                                                                     \
  }                                                                                       \
  ATTRIBUTE void SumBFloat16sInto##SUFFIX(uint16_t* accumulator, const uint16_t* incoming, \
                                          size_t count) {                                 \
    size_t i = 0;                                                                         \
    for (; i + 8 <= count; i += 8) {                                                      \
      Floats8 a, b;                                                                       \
      WidenBFloat16s(accumulator + i, &a);                                                \
      WidenBFloat16s(incoming + i, &b);                                                   \
      a += b;                                                                             \
      NarrowToBFloat16s(&a, accumulator + i);                                             \
    }                                                                                     \
    for (; i < count; ++i) {                                                              \
      accumulator[i] =                                                                    \
          FloatToBFloat16(BFloat16ToFloat(accumulator[i]) + BFloat16ToFloat(incoming[i])); \
    }                                                                                     \
  }

TFDIST_BFLOAT16_LOOPS(Baseline, )
#ifdef TFDIST_HAVE_F16C_PATH
TFDIST_BFLOAT16_LOOPS(Avx2, __attribute__((target("avx2"))))
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#define TFDIST_BFLOAT16_DISPATCH(NAME, ...) \
  return HasAvx2() ? NAME##Avx2(__VA_ARGS__) : NAME##Baseline(__VA_ARGS__)
#else
#define TFDIST_BFLOAT16_DISPATCH(NAME, ...) return NAME##Baseline(__VA_ARGS__)
#endif

}  // namespace

void FloatsToBFloat16s(const float* in, uint16_t* out, size_t count, float factor) {
  TFDIST_BFLOAT16_DISPATCH(FloatsToBFloat16s, in, out, count, factor);
}

void BFloat16sToFloats(const uint16_t* in, float* out, size_t count, float factor) {
  TFDIST_BFLOAT16_DISPATCH(BFloat16sToFloats, in, out, count, factor);
}

void SumBFloat16sInto(uint16_t* accumulator, const uint16_t* incoming, size_t count) {
  TFDIST_BFLOAT16_DISPATCH(SumBFloat16sInto, accumulator, incoming, count);
}

}  // namespace tfdist
