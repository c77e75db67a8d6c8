// Orthonormalisation of the columns of a small dense matrix, the step of
// PowerSGD between the two allreduces (P -> P-hat).
#ifndef TFDIST_CORE_COMPRESSION_ORTHOGONALIZE_H_
#define TFDIST_CORE_COMPRESSION_ORTHOGONALIZE_H_

#include <cstddef>

namespace tfdist {

// Makes the `cols` columns of `matrix` (row-major, rows x cols) orthonormal,
// in place, by modified Gram-Schmidt with double-precision accumulation and
// one re-orthogonalisation pass (which keeps float32 columns orthogonal to
// ~1e-7 even when they start nearly parallel). A column that is zero, or
// whose part orthogonal to the columns before it is below 1e-6 of its own
// norm (linearly dependent), becomes zero: it then contributes nothing to
// the low-rank product instead of amplifying rounding noise or producing
// NaN. The result depends only on the input, so every rank orthogonalising
// the same allreduced P gets the same P-hat.
void OrthonormalizeColumns(float* matrix, size_t rows, size_t cols);

}  // namespace tfdist

#endif  // TFDIST_CORE_COMPRESSION_ORTHOGONALIZE_H_
