#include "cc/core/compression/powersgd.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tfdist {

bool PowerSgdCompresses(int64_t n, int64_t m, int64_t rank) {
  return n > 0 && m > 0 && rank > 0 && (n + m) * rank * 2 < n * m;
}

namespace {

// SplitMix64: a tiny generator with a fixed definition, so Q's first value
// does not depend on the standard library's distributions.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Uniform01(uint64_t* state) {
  // 53 random bits in (0, 1): never 0, so the logarithm below is finite.
  return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001B3ull;
  return hash;
}

void FillNormal(uint64_t state, size_t count, float* out) {
  const double two_pi = 6.283185307179586;
  for (size_t i = 0; i < count; ++i) {
    // Box-Muller, one value per pair of uniforms: simple and fixed.
    const double u1 = Uniform01(&state);
    const double u2 = Uniform01(&state);
    out[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2));
  }
}

constexpr double kDependentColumn = 1e-6;

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Whether `column` keeps a part orthogonal to the orthonormal `basis`; if so
// that part, normalised, joins the basis.
bool AddIndependent(std::vector<double> column, std::vector<std::vector<double>>* basis) {
  const double original = std::sqrt(Dot(column, column));
  if (!std::isfinite(original) || !(original > 0.0)) return false;
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::vector<double>& b : *basis) {
      const double projection = Dot(column, b);
      for (size_t r = 0; r < column.size(); ++r) column[r] -= projection * b[r];
    }
  }
  const double norm = std::sqrt(Dot(column, column));
  if (!std::isfinite(norm) || !(norm > kDependentColumn * original)) return false;
  for (double& x : column) x /= norm;
  basis->push_back(std::move(column));
  return true;
}

}  // namespace

void PowerSgdInitialQ(const std::string& name, size_t m, size_t rank, float* q) {
  FillNormal(Fnv1a(name), m * rank, q);
}

size_t PowerSgdRefillQ(const std::string& name, size_t m, size_t rank, float* q) {
  std::vector<std::vector<double>> basis;
  std::vector<double> column(m);
  std::vector<float> candidates;
  size_t refilled = 0;
  for (size_t c = 0; c < rank; ++c) {
    for (size_t r = 0; r < m; ++r) column[r] = q[r * rank + c];
    if (AddIndependent(column, &basis)) continue;
    ++refilled;
    // Column c of the initial Q first, then of generators seeded by the name
    // and an attempt number; with m > 2 rank (PowerSgdCompresses) a random
    // column is dependent with probability 0, so the bound is never reached.
    for (uint64_t attempt = 0; attempt < 8; ++attempt) {
      if (attempt == 0) {
        candidates.resize(m * rank);
        PowerSgdInitialQ(name, m, rank, candidates.data());
        for (size_t r = 0; r < m; ++r) column[r] = candidates[r * rank + c];
      } else {
        candidates.resize(m);
        FillNormal(Fnv1a(name + "#refill" + std::to_string(c) + "." + std::to_string(attempt)),
                   m, candidates.data());
        for (size_t r = 0; r < m; ++r) column[r] = candidates[r];
      }
      if (AddIndependent(column, &basis)) break;
    }
    for (size_t r = 0; r < m; ++r) q[r * rank + c] = static_cast<float>(column[r]);
  }
  return refilled;
}

// The same per-element arithmetic as the definition (products of floats in
// double, summed over c in order, rounded once), arranged so that the inner
// loop runs along a row: Q is transposed to rank x m doubles once, and each
// row's m sums are accumulated side by side, which the compiler vectorises
// (a dot product per element, over Q's rows, ran at a third of the speed).
void PowerSgdFinish(const float* accumulated, const float* p_hat, const float* q_local,
                    const float* q_reduced, size_t n, size_t m, size_t rank, float* output,
                    float* residual) {
  std::vector<double> reduced_t(rank * m), local_t(rank * m);
  for (size_t j = 0; j < m; ++j) {
    for (size_t c = 0; c < rank; ++c) {
      reduced_t[c * m + j] = q_reduced[j * rank + c];
      local_t[c * m + j] = q_local[j * rank + c];
    }
  }
  std::vector<double> reduced(m), local(m);
  for (size_t i = 0; i < n; ++i) {
    const float* p_row = p_hat + i * rank;
    std::fill(reduced.begin(), reduced.end(), 0.0);
    std::fill(local.begin(), local.end(), 0.0);
    for (size_t c = 0; c < rank; ++c) {
      const double p = p_row[c];
      const double* reduced_row = reduced_t.data() + c * m;
      const double* local_row = local_t.data() + c * m;
      for (size_t j = 0; j < m; ++j) {
        reduced[j] += p * reduced_row[j];
        local[j] += p * local_row[j];
      }
    }
    float* output_row = output + i * m;
    for (size_t j = 0; j < m; ++j) output_row[j] = static_cast<float>(reduced[j]);
    if (residual != nullptr) {
      const float* accumulated_row = accumulated + i * m;
      float* residual_row = residual + i * m;
      for (size_t j = 0; j < m; ++j) {
        residual_row[j] = static_cast<float>(accumulated_row[j] - local[j]);
      }
    }
  }
}

}  // namespace tfdist
