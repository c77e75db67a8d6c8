// The decompression side of a sparse exchange: every rank's (index, value)
// pairs added into one dense tensor.
#ifndef TFDIST_CORE_COMPRESSION_SCATTER_ADD_H_
#define TFDIST_CORE_COMPRESSION_SCATTER_ADD_H_

#include <cstddef>
#include <cstdint>

#include "cc/core/base/status.h"

namespace tfdist {

// dense[indices[i]] += values[i] for i = 0 .. pairs-1, in that order, so the
// floating-point sum is the same on every rank given the same pairs (an
// allgather delivers them in rank order). Does not clear `dense`. An index
// outside [0, n) is an InvalidArgument error and leaves `dense` untouched.
Status ScatterAdd(const int32_t* indices, const float* values, size_t pairs, float* dense,
                  size_t n);

}  // namespace tfdist

#endif  // TFDIST_CORE_COMPRESSION_SCATTER_ADD_H_
