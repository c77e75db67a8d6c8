// Top-k sparsification with error feedback (Aji & Heafield 2017; Stich et al.
// 2018): each step a rank sends only the k entries of (gradient + residual)
// with the largest magnitude, as (index, value) pairs, and keeps everything
// else as its residual for the next step. Entries never sent are therefore
// delayed, not lost.
#ifndef TFDIST_CORE_COMPRESSION_TOPK_H_
#define TFDIST_CORE_COMPRESSION_TOPK_H_

#include <cstddef>
#include <cstdint>

#include "cc/core/base/status.h"

namespace tfdist {

// k = ceil(ratio * n), clamped to [1, n] (0 when n is 0). The product is
// nudged down by a relative 1e-9 so that ratios that are not exact in binary
// (0.07 * 100 = 7.000000000000001) still give the k a person expects; the
// Python side uses the same formula (tfdist/sparse_compression.py).
size_t TopkCount(double ratio, size_t n);

// Selects the k entries of `accumulated` (n floats) with the largest
// magnitude. Ties break towards the lower index and NaN ranks above every
// number, so the selection is a pure function of the input and identical on
// every rank and every run. Writes the chosen indices in increasing order to
// `indices` and their values (bit-exact copies) to `values`, both of length
// k. When `residual` is not null it receives the entries not chosen, with 0
// at the chosen ones, so that for every i the value sent (or 0) plus
// residual[i] reproduces accumulated[i] exactly. `residual` may alias
// `accumulated`.
Status TopkSelect(const float* accumulated, size_t n, size_t k, int32_t* indices,
                  float* values, float* residual);

// Deep Gradient Compression's momentum correction (Lin et al., 2018): the
// momentum is accumulated locally, before the selection, instead of by the
// optimizer after the exchange, where it would keep amplifying updates that
// error feedback releases late. In float32, element by element:
//   velocity = momentum * velocity + gradient;  residual = residual + velocity.
void MomentumAccumulate(const float* gradient, size_t n, float momentum, float* velocity,
                        float* residual);

// One top-k step with momentum correction: MomentumAccumulate, then
// TopkSelect of the residual in place (so the value sent or the new
// residual[i] is bit for bit the accumulated residual[i]), then "momentum
// factor masking": velocity is zeroed at the sent entries too, so momentum
// does not push an update that has already been applied.
Status TopkSelectWithMomentum(const float* gradient, size_t n, size_t k, float momentum,
                              float* velocity, float* residual, int32_t* indices,
                              float* values);

}  // namespace tfdist

#endif  // TFDIST_CORE_COMPRESSION_TOPK_H_
