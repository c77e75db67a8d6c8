#include "cc/core/compression/orthogonalize.h"

#include <cmath>
#include <vector>

namespace tfdist {

namespace {

constexpr double kDependentColumn = 1e-6;

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void OrthonormalizeColumns(float* matrix, size_t rows, size_t cols) {
  // Columns are copied out to double: rows are contiguous in memory, and
  // the projections need the precision.
  std::vector<std::vector<double>> basis;
  basis.reserve(cols);
  std::vector<double> column(rows);
  for (size_t c = 0; c < cols; ++c) {
    for (size_t r = 0; r < rows; ++r) column[r] = matrix[r * cols + c];
    const double original_norm = std::sqrt(Dot(column, column));
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::vector<double>& q : basis) {
        const double projection = Dot(column, q);
        for (size_t r = 0; r < rows; ++r) column[r] -= projection * q[r];
      }
    }
    const double norm = std::sqrt(Dot(column, column));
    const bool dependent = !(norm > 0.0) || !(norm > kDependentColumn * original_norm) ||
                           !std::isfinite(norm);
    if (dependent) {
      for (size_t r = 0; r < rows; ++r) matrix[r * cols + c] = 0.0f;
      continue;
    }
    for (size_t r = 0; r < rows; ++r) {
      column[r] /= norm;
      matrix[r * cols + c] = static_cast<float>(column[r]);
    }
    basis.push_back(column);
  }
}

}  // namespace tfdist
