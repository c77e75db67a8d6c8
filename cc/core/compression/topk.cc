// Selection: the strict total order is magnitude descending, then index
// ascending; the threshold comes from std::nth_element over the magnitudes'
// keys, O(n) on average, and the pairs go out in index order (the scatter-add
// then walks memory forwards).
#include "cc/core/compression/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace tfdist {

size_t TopkCount(double ratio, size_t n) {
  if (n == 0) return 0;
  const double exact = ratio * static_cast<double>(n);
  const double k = std::ceil(exact - 1e-9 * exact);
  if (!(k >= 1.0)) return 1;
  if (k >= static_cast<double>(n)) return n;
  return static_cast<size_t>(k);
}

namespace {

// The selection order as one unsigned key per element: a float's magnitude
// orders like the bits of its absolute value, and every NaN (whatever its
// sign or payload) gets one key above +inf, so that a broken gradient is sent
// (and seen by every rank) rather than hidden in one rank's residual. Equal
// keys are then ordered by index.
constexpr uint32_t kNaNKey = 0x7f800001u;

uint32_t SelectionKey(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits &= 0x7fffffffu;
  return bits > 0x7f800000u ? kNaNKey : bits;
}

Status CheckArguments(size_t n, size_t k) {
  if (k > n) {
    return Status::InvalidArgument("top-k: k = " + std::to_string(k) +
                                   " is larger than the tensor's " + std::to_string(n) +
                                   " elements");
  }
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("top-k: tensors of more than 2^31-1 elements are not "
                                   "supported, got " + std::to_string(n));
  }
  return Status::OK();
}

}  // namespace

// The k-th largest key is found with nth_element on a contiguous copy of the
// keys (an index array with an indirect comparison misses the cache on every
// comparison once the tensor outgrows it, so its time grows far faster than
// the tensor); one pass in index order then takes every key above it and the first
// of the keys equal to it, which is exactly the first k of the strict order
// and leaves the indices sorted.
Status TopkSelect(const float* accumulated, size_t n, size_t k, int32_t* indices,
                  float* values, float* residual) {
  const Status valid = CheckArguments(n, k);
  if (!valid.ok()) return valid;
  if (k == 0) {
    if (residual != nullptr && residual != accumulated) {
      std::copy(accumulated, accumulated + n, residual);
    }
    return Status::OK();
  }
  uint32_t threshold = 0;
  size_t equal_wanted = k;
  if (k < n) {
    std::vector<uint32_t> scratch(n);
    for (size_t i = 0; i < n; ++i) scratch[i] = SelectionKey(accumulated[i]);
    std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(),
                     std::greater<uint32_t>());
    threshold = scratch[k - 1];
    size_t above = 0;
    for (size_t i = 0; i < k - 1; ++i) above += scratch[i] > threshold;
    equal_wanted = k - above;
  }
  size_t taken = 0;
  for (size_t i = 0; i < n && taken < k; ++i) {
    const uint32_t key = SelectionKey(accumulated[i]);
    if (key > threshold || (key == threshold && equal_wanted > 0)) {
      if (key == threshold) --equal_wanted;
      indices[taken] = static_cast<int32_t>(i);
      values[taken] = accumulated[i];
      ++taken;
    }
  }
  if (residual != nullptr) {
    if (residual != accumulated) std::copy(accumulated, accumulated + n, residual);
    for (size_t i = 0; i < k; ++i) residual[indices[i]] = 0.0f;
  }
  return Status::OK();
}

void MomentumAccumulate(const float* gradient, size_t n, float momentum, float* velocity,
                        float* residual) {
  for (size_t i = 0; i < n; ++i) {
    velocity[i] = momentum * velocity[i] + gradient[i];
    residual[i] += velocity[i];
  }
}

Status TopkSelectWithMomentum(const float* gradient, size_t n, size_t k, float momentum,
                              float* velocity, float* residual, int32_t* indices,
                              float* values) {
  // Checked first so that a rejected call leaves the state untouched.
  const Status valid = CheckArguments(n, k);
  if (!valid.ok()) return valid;
  MomentumAccumulate(gradient, n, momentum, velocity, residual);
  const Status status = TopkSelect(residual, n, k, indices, values, residual);
  if (!status.ok()) return status;
  for (size_t i = 0; i < k; ++i) velocity[indices[i]] = 0.0f;
  return Status::OK();
}

}  // namespace tfdist
