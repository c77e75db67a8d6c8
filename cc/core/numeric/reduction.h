// Element-wise reduction kernels: the only place that knows how to combine
// two buffers of a DataType with a ReduceOp. Every algorithm reduces through
// ReduceInto, so all of them agree bit for bit.
#ifndef TFDIST_CORE_NUMERIC_REDUCTION_H_
#define TFDIST_CORE_NUMERIC_REDUCTION_H_

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"

namespace tfdist {

// OK when ReduceInto accepts (dtype, op); InvalidArgument otherwise (kBool,
// or a value outside the enums).
Status CheckReducible(DataType dtype, ReduceOp op);

// accumulator[i] = accumulator[i] (op) incoming[i] for i in [0, count).
//  * Integers wrap on overflow (two's complement), Min/Max compare signed
//    values for the signed types.
//  * float16 and bfloat16 are widened to float32 per element, combined, and
//    rounded back to nearest even: one rounding per pairwise combination.
//  * Min/Max of floats follow `incoming < accumulator ? incoming : accumulator`
//    (and the mirror for Max): a NaN in `incoming` is ignored, a NaN in
//    `accumulator` is kept. Every algorithm combines the same pairs, so all
//    ranks still end with the same bits.
// The two buffers must not overlap. Precondition: CheckReducible(dtype, op)
// is OK; otherwise the call does nothing.
void ReduceInto(void* accumulator, const void* incoming, size_t count,
                DataType dtype, ReduceOp op);

// output[i] = accumulator[i] (op) incoming[i]: ReduceInto's bits, for an
// algorithm whose first step reads its input where it lies and writes the
// result elsewhere (out of place), instead of first copying the input into
// the output as a pass of its own. Cache-sized blocks of the accumulator are
// copied into the output just before each is reduced there, so the memory
// traffic is one read of each operand and one write of the output.
// `output == accumulator` is ReduceInto; otherwise none of the three may
// overlap. A `factor` other than 1 multiplies each result as
// ReduceIntoScaled does (the same bits), block by block while in cache.
// Same precondition as ReduceInto.
void ReduceOutOfPlace(void* output, const void* accumulator, const void* incoming,
                      size_t count, DataType dtype, ReduceOp op, double factor = 1.0);

// ReduceInto, then each element of the accumulator multiplied by `factor`
// exactly as ConvertScaled(accumulator, dtype, accumulator, dtype, count,
// factor) does it: the same bits, in one pass over the memory where that is
// possible (float32 with a factor float32 holds exactly, such as Average's
// 1/P for P a power of two), in two passes otherwise.
void ReduceIntoScaled(void* accumulator, const void* incoming, size_t count,
                      DataType dtype, ReduceOp op, double factor);

// Writes `count` elements of op's identity (0 for Sum, -0.0 for floats, 1 for Product, the
// largest value or +inf for Min, the lowest or -inf for Max): what a rank
// that has joined (tfdist.join) contributes, so that the others' result is
// their own reduction. Same precondition as ReduceInto.
void FillIdentity(void* buffer, size_t count, DataType dtype, ReduceOp op);

}  // namespace tfdist

#endif  // TFDIST_CORE_NUMERIC_REDUCTION_H_
