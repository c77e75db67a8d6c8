// PowerSGD's C++ steps, with the matrix products and the allreduces done
// here sequentially: full rank reproduces the exact average; the
// orthogonalisation copes with zero and dependent columns.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cc/core/compression/orthogonalize.h"
#include "cc/core/compression/powersgd.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using Matrix = std::vector<float>;  // row-major

// a (rows x inner) times b (inner x cols), or a^T b when `transpose_a`.
Matrix Multiply(const Matrix& a, const Matrix& b, size_t rows, size_t inner, size_t cols,
                bool transpose_a) {
  Matrix out(rows * cols, 0.0f);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) {
      double sum = 0.0;
      for (size_t t = 0; t < inner; ++t) {
        const float av = transpose_a ? a[t * rows + i] : a[i * inner + t];
        sum += static_cast<double>(av) * b[t * cols + j];
      }
      out[i * cols + j] = static_cast<float>(sum);
    }
  }
  return out;
}

Matrix Mean(const std::vector<Matrix>& parts) {
  Matrix mean(parts[0].size(), 0.0f);
  for (size_t i = 0; i < mean.size(); ++i) {
    double sum = 0.0;
    for (const Matrix& p : parts) sum += p[i];
    mean[i] = static_cast<float>(sum / parts.size());
  }
  return mean;
}

// One PowerSGD step over `ranks` (no error feedback); returns the output
// every rank gets and fills each rank's residual.
Matrix PowerSgdStep(const std::vector<Matrix>& m, size_t n, size_t cols, size_t r,
                    Matrix* q, std::vector<Matrix>* residuals) {
  std::vector<Matrix> p_parts;
  for (const Matrix& mi : m) p_parts.push_back(Multiply(mi, *q, n, cols, r, false));
  Matrix p = Mean(p_parts);
  tfdist::OrthonormalizeColumns(p.data(), n, r);
  std::vector<Matrix> q_parts;
  for (const Matrix& mi : m) q_parts.push_back(Multiply(mi, p, cols, n, r, true));
  *q = Mean(q_parts);
  Matrix output(n * cols);
  residuals->assign(m.size(), Matrix(n * cols));
  for (size_t i = 0; i < m.size(); ++i) {
    tfdist::PowerSgdFinish(m[i].data(), p.data(), q_parts[i].data(), q->data(), n, cols, r,
                           output.data(), (*residuals)[i].data());
  }
  return output;
}

double MaxAbsDifference(const Matrix& a, const Matrix& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

TFDIST_TEST(PowerSgdFullRankReproducesTheAverage) {
  std::mt19937 generator(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t shapes[][2] = {{4, 6}, {6, 4}, {5, 5}, {1, 3}, {16, 3}};
  for (const auto& shape : shapes) {
    const size_t n = shape[0], cols = shape[1], r = std::min(n, cols);
    for (int ranks : {1, 2, 3, 4}) {
      std::vector<Matrix> m(ranks, Matrix(n * cols));
      for (Matrix& mi : m) for (float& v : mi) v = normal(generator);
      Matrix q(cols * r);
      tfdist::PowerSgdInitialQ("layer/kernel", cols, r, q.data());
      std::vector<Matrix> residuals;
      const Matrix output = PowerSgdStep(m, n, cols, r, &q, &residuals);
      const Matrix mean = Mean(m);
      CHECK_EQ_MSG(MaxAbsDifference(output, mean) < 1e-5, true,
                   n << "x" << cols << " P=" << ranks << " error "
                     << MaxAbsDifference(output, mean));
      // With n <= r, P-hat spans every column space, so each rank's own
      // matrix is reproduced too and nothing is left over.
      for (const Matrix& e : residuals) {
        if (n > r) break;
        CHECK_EQ_MSG(MaxAbsDifference(e, Matrix(n * cols, 0.0f)) < 1e-5, true,
                     n << "x" << cols << " residual");
      }
    }
  }
}

TFDIST_TEST(PowerSgdFinishIsItsDefinitionBitForBit) {
  // output[i][j] = sum over c of p[i][c] q_reduced[j][c] and residual = M - P Q_local^T,
  // products and sums in double in c order, rounded once: the row-wise loops
  // must give exactly these bits.
  std::mt19937 generator(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t r : {1, 2, 3}) {
    const size_t n = 37, m = 53;
    Matrix accumulated(n * m), p(n * r), q_local(m * r), q_reduced(m * r);
    for (Matrix* x : {&accumulated, &p, &q_local, &q_reduced}) {
      for (float& v : *x) v = normal(generator);
    }
    Matrix output(n * m), residual(n * m);
    tfdist::PowerSgdFinish(accumulated.data(), p.data(), q_local.data(), q_reduced.data(), n,
                           m, r, output.data(), residual.data());
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < m; ++j) {
        double reduced = 0.0, local = 0.0;
        for (size_t c = 0; c < r; ++c) {
          reduced += static_cast<double>(p[i * r + c]) * q_reduced[j * r + c];
          local += static_cast<double>(p[i * r + c]) * q_local[j * r + c];
        }
        CHECK_EQ(output[i * m + j], static_cast<float>(reduced));
        CHECK_EQ(residual[i * m + j], static_cast<float>(accumulated[i * m + j] - local));
      }
    }
  }
}

TFDIST_TEST(PowerSgdRankDeficientAverageStaysExactAndFinite) {
  // Columns 0 and 2 of the average are equal, column 1 zero: P has a
  // dependent column and a zero one, yet the output is the average.
  const size_t n = 5, cols = 3, r = 3;
  Matrix a(n * cols, 0.0f);
  for (size_t i = 0; i < n; ++i) a[i * cols] = a[i * cols + 2] = float(i) - 1.5f;
  Matrix q(cols * r);
  tfdist::PowerSgdInitialQ("deficient", cols, r, q.data());
  std::vector<Matrix> residuals;
  const Matrix output = PowerSgdStep({a, a}, n, cols, r, &q, &residuals);
  for (float v : output) CHECK(std::isfinite(v));
  CHECK_EQ_MSG(MaxAbsDifference(output, a) < 1e-5, true, MaxAbsDifference(output, a));
}

TFDIST_TEST(OrthonormalizeZeroesZeroAndDependentColumns) {
  // Columns: x, 0, 2x, y (x, y independent) -> q1, 0, 0, q2.
  const size_t rows = 4, cols = 4;
  const float x[] = {1, 2, 0, -1}, y[] = {0, 1, 1, 3};
  Matrix m(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    m[i * cols + 0] = x[i];
    m[i * cols + 1] = 0.0f;
    m[i * cols + 2] = 2 * x[i];
    m[i * cols + 3] = y[i];
  }
  tfdist::OrthonormalizeColumns(m.data(), rows, cols);
  auto dot = [&](size_t a, size_t b) {
    double s = 0.0;
    for (size_t i = 0; i < rows; ++i) s += double(m[i * cols + a]) * m[i * cols + b];
    return s;
  };
  CHECK(std::fabs(dot(0, 0) - 1.0) < 1e-6);
  CHECK(std::fabs(dot(3, 3) - 1.0) < 1e-6);
  CHECK(std::fabs(dot(0, 3)) < 1e-6);
  CHECK_EQ(dot(1, 1), 0.0);
  CHECK_EQ(dot(2, 2), 0.0);
}

TFDIST_TEST(OrthonormalizeKeepsNearlyParallelColumnsOrthogonal) {
  const size_t rows = 200, cols = 4;
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix m(rows * cols);
  for (size_t i = 0; i < rows; ++i) {
    const float base = normal(generator);
    for (size_t c = 0; c < cols; ++c) m[i * cols + c] = base + 1e-3f * normal(generator);
  }
  tfdist::OrthonormalizeColumns(m.data(), rows, cols);
  for (size_t a = 0; a < cols; ++a) {
    for (size_t b = 0; b < cols; ++b) {
      double s = 0.0;
      for (size_t i = 0; i < rows; ++i) s += double(m[i * cols + a]) * m[i * cols + b];
      CHECK_EQ_MSG(std::fabs(s - (a == b ? 1.0 : 0.0)) < 1e-5, true, a << "," << b << " " << s);
    }
  }
}

TFDIST_TEST(PowerSgdInitialQIsAFunctionOfTheName) {
  Matrix a(12), b(12), c(12);
  tfdist::PowerSgdInitialQ("w", 6, 2, a.data());
  tfdist::PowerSgdInitialQ("w", 6, 2, b.data());
  tfdist::PowerSgdInitialQ("v", 6, 2, c.data());
  CHECK(a == b);
  CHECK(a != c);
  for (float v : a) CHECK(std::isfinite(v));
}

TFDIST_TEST(PowerSgdCompressesOnlyWhenFactorsAreSmaller) {
  CHECK(tfdist::PowerSgdCompresses(64, 64, 2));
  CHECK(!tfdist::PowerSgdCompresses(4, 4, 1));   // (8)*1*2 = 16, not < 16
  CHECK(!tfdist::PowerSgdCompresses(1, 1000, 1));
  CHECK(!tfdist::PowerSgdCompresses(64, 64, 0));
}

// A warm-start Q with a zero column (what an all-zero gradient leaves) or a
// dependent one gets that column from the name's initial Q; good columns
// stay bit for bit, and the same Q and name give the same refill.
TFDIST_TEST(PowerSgdRefillsZeroAndDependentColumnsOfQ) {
  const size_t m = 10, r = 3;
  Matrix initial(m * r);
  tfdist::PowerSgdInitialQ("w", m, r, initial.data());
  Matrix zero(m * r, 0.0f);
  CHECK_EQ(tfdist::PowerSgdRefillQ("w", m, r, zero.data()), size_t{3});
  CHECK(zero == initial);

  Matrix q = initial;
  for (size_t i = 0; i < m; ++i) {
    q[i * r + 1] = 2.0f * q[i * r + 0];          // dependent on column 0
    q[i * r + 2] = std::nanf("");                // not finite
  }
  const Matrix before = q;
  Matrix again = q;
  CHECK_EQ(tfdist::PowerSgdRefillQ("w", m, r, q.data()), size_t{2});
  for (size_t i = 0; i < m; ++i) {
    CHECK_EQ(q[i * r + 0], before[i * r + 0]);
    CHECK_EQ(q[i * r + 1], initial[i * r + 1]);
    CHECK_EQ(q[i * r + 2], initial[i * r + 2]);
  }
  tfdist::PowerSgdRefillQ("w", m, r, again.data());
  CHECK(again == q);
  // Independent columns are left alone.
  Matrix good = initial;
  CHECK_EQ(tfdist::PowerSgdRefillQ("w", m, r, good.data()), size_t{0});
  CHECK(good == initial);

  // A zero step, then a rank-1 gradient: the refilled Q recovers it exactly.
  const size_t n = 8;
  Matrix u_v(n * m);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < m; ++j) u_v[i * m + j] = (1.0f + i) * (0.5f - 0.1f * j);
  Matrix warm(m * 1, 0.0f);
  tfdist::PowerSgdRefillQ("w1", m, 1, warm.data());
  std::vector<Matrix> residuals;
  const Matrix output = PowerSgdStep({u_v, u_v}, n, m, 1, &warm, &residuals);
  for (size_t i = 0; i < n * m; ++i) CHECK(std::fabs(output[i] - u_v[i]) < 1e-4f);
}

}  // namespace
}  // namespace tfdist_test
