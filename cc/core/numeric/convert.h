// Copies elements between buffers, converting the element type and applying
// a scale factor in double precision on the way. Used to pack tensors into a
// fusion buffer (and into float32 staging for float16/bfloat16, which are
// accumulated in float32), to unpack the result with the postscale, and by
// the ring to scale each reduced chunk once, where it is reduced.
#ifndef TFDIST_CORE_NUMERIC_CONVERT_H_
#define TFDIST_CORE_NUMERIC_CONVERT_H_

#include <cstddef>

#include "cc/core/base/data_type.h"

namespace tfdist {

// dst[i] = (dst_type)(src[i] * factor). Integers are rounded to the nearest
// value (ties to even) and saturate at their type's limits. factor == 1 with
// equal types is a plain copy.
void ConvertScaled(const void* src, DataType src_type, void* dst,
                   DataType dst_type, size_t count, double factor);

// Whether float32 holds `factor` exactly; then scaling float32 in float32
// gives the same bits as through double precision (convert.cc).
bool FloatHoldsExactly(double factor);

// The type reductions of `dtype` run in: float32 for the 16-bit floats,
// the type itself otherwise.
DataType AccumulationType(DataType dtype);

}  // namespace tfdist

#endif  // TFDIST_CORE_NUMERIC_CONVERT_H_
