// Adasum: adaptive summation of the ranks' gradients (Maleki et al.,
// "Scaling Distributed Training with Adaptive Summation", MLSys 2021).
#ifndef TFDIST_CORE_COLLECTIVES_ADASUM_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_ADASUM_ALLREDUCE_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// The Adasum combination of two vectors, into `a`:
//   a <- (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b,
// a zero vector contributing nothing (a zero `a` gives b). The dot product
// and the norms are accumulated in double. float16, bfloat16, float32 and
// float64; the caller checks the dtype (CheckAdasumType).
void AdasumCombine(void* a, const void* b, size_t count, DataType dtype);

// InvalidArgument naming Adasum and `dtype` unless it is a floating type.
Status CheckAdasumType(DataType dtype);

// In-place Adasum allreduce of `buffer`, which holds consecutive tensors of
// `counts[i]` elements each: every tensor is combined on its own (its dot
// products and norms are its own). See adasum_allreduce.cc for the pairing
// order and the cost. Any group size, any counts (0 included); every rank
// ends with identical bits.
Status AdasumAllreduce(Transport& transport, void* buffer, const std::vector<size_t>& counts,
                       DataType dtype);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_ADASUM_ALLREDUCE_H_
