#ifndef TFDIST_CORE_COLLECTIVES_BUTTERFLY_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_BUTTERFLY_ALLREDUCE_H_

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Allreduce of `count` elements; see butterfly_allreduce.cc for the steps and their
// cost. Any group size, any count (0 included). Reads `input` (never
// written) where it lies and leaves the result in `output`, whose contents
// on entry do not matter: the first step writes input (op) received, so no
// pass of its own copies the input. `input == output` is in place;
// otherwise the two must not overlap. Every element of the result is
// multiplied by `result_scale` (ConvertScaled's rounding, applied once, by
// the step that completes it, so every rank ends with the same bits):
// averaging costs no pass of its own. Every rank must pass the same scale.
Status ButterflyAllreduce(Transport& transport, const void* input, void* output,
                          size_t count, DataType dtype, ReduceOp op, double result_scale = 1.0);

// In place, in `buffer`.
inline Status ButterflyAllreduce(Transport& transport, void* buffer, size_t count,
                                 DataType dtype, ReduceOp op) {
  return ButterflyAllreduce(transport, buffer, buffer, count, dtype, op);
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_BUTTERFLY_ALLREDUCE_H_
