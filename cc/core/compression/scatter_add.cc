#include "cc/core/compression/scatter_add.h"

#include <string>

namespace tfdist {

Status ScatterAdd(const int32_t* indices, const float* values, size_t pairs, float* dense,
                  size_t n) {
  for (size_t i = 0; i < pairs; ++i) {
    if (indices[i] < 0 || static_cast<size_t>(indices[i]) >= n) {
      return Status::InvalidArgument("scatter-add: index " + std::to_string(indices[i]) +
                                     " of pair " + std::to_string(i) +
                                     " is outside a tensor of " + std::to_string(n) +
                                     " elements");
    }
  }
  for (size_t i = 0; i < pairs; ++i) dense[indices[i]] += values[i];
  return Status::OK();
}

}  // namespace tfdist
