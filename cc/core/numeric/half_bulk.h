// Whole-buffer conversions between float32 and the 16-bit floats, and sums
// of 16-bit buffers through float32: what fp16/bf16 wire compression runs on
// every element it packs, reduces and unpacks. On x86 with F16C the float16
// loops convert eight elements per instruction; elsewhere they fall back to
// half.h one element at a time. Both give the same bits (half.h matches F16C),
// so a job whose ranks differ in CPU features still agrees.
#ifndef TFDIST_CORE_NUMERIC_HALF_BULK_H_
#define TFDIST_CORE_NUMERIC_HALF_BULK_H_

#include <cstddef>
#include <cstdint>

namespace tfdist {

// out[i] = round16(in[i] * factor): one float32 multiply (skipped when
// factor is 1), then one rounding to nearest even.
void FloatsToHalves(const float* in, uint16_t* out, size_t count, float factor);
void FloatsToBFloat16s(const float* in, uint16_t* out, size_t count, float factor);

// out[i] = widen(in[i]) * factor in float32 (the widening is exact).
void HalvesToFloats(const uint16_t* in, float* out, size_t count, float factor);
void BFloat16sToFloats(const uint16_t* in, float* out, size_t count, float factor);

// accumulator[i] = round16(widen(accumulator[i]) + widen(incoming[i])).
void SumHalvesInto(uint16_t* accumulator, const uint16_t* incoming, size_t count);
void SumBFloat16sInto(uint16_t* accumulator, const uint16_t* incoming, size_t count);

}  // namespace tfdist

#endif  // TFDIST_CORE_NUMERIC_HALF_BULK_H_
