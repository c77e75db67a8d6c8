// Selection is std::nth_element over an index array with a strict total
// order (magnitude descending, then index ascending), O(n) on average, then a
// sort of the k chosen indices so that the pairs go out in index order (the
// scatter-add then walks memory forwards).
#include "cc/core/compression/topk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
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

// NaN sorts above +inf so that a broken gradient is sent (and seen by every
// rank) rather than hidden in one rank's residual.
float Magnitude(float value) {
  return std::isnan(value) ? std::numeric_limits<float>::infinity() : std::fabs(value);
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

Status TopkSelect(const float* accumulated, size_t n, size_t k, int32_t* indices,
                  float* values, float* residual) {
  const Status valid = CheckArguments(n, k);
  if (!valid.ok()) return valid;
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto before = [accumulated](int32_t a, int32_t b) {
    const float ma = Magnitude(accumulated[a]);
    const float mb = Magnitude(accumulated[b]);
    const bool nan_a = std::isnan(accumulated[a]);
    const bool nan_b = std::isnan(accumulated[b]);
    if (nan_a != nan_b) return nan_a;
    if (ma != mb) return ma > mb;
    return a < b;
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  std::sort(order.begin(), order.begin() + k);
  for (size_t i = 0; i < k; ++i) {
    indices[i] = order[i];
    values[i] = accumulated[order[i]];
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
