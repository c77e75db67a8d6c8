// Top-k selection and the scatter-add: exactly the k largest magnitudes,
// ties to the lower index, and sent + residual == input bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cc/core/compression/scatter_add.h"
#include "cc/core/compression/topk.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::ScatterAdd;
using tfdist::TopkCount;
using tfdist::TopkSelect;
using tfdist::TopkSelectWithMomentum;

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// The reference: indices sorted by (|x| descending, index ascending), first k.
std::vector<int32_t> ReferenceTopk(const std::vector<float>& x, size_t k) {
  std::vector<int32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::fabs(x[a]) > std::fabs(x[b]);
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void CheckSelection(const std::vector<float>& input, size_t k, const char* label) {
  const size_t n = input.size();
  std::vector<int32_t> indices(k);
  std::vector<float> values(k);
  std::vector<float> residual(n);
  CHECK_OK(TopkSelect(input.data(), n, k, indices.data(), values.data(), residual.data()));
  CHECK_EQ_MSG(indices == ReferenceTopk(input, k), true, label << " n=" << n << " k=" << k);
  // Sent (scattered into zeros) plus residual is the input, bit for bit.
  std::vector<float> sent(n, 0.0f);
  CHECK_OK(ScatterAdd(indices.data(), values.data(), k, sent.data(), n));
  std::vector<bool> chosen(n, false);
  std::vector<float> chosen_value(n, 0.0f);
  for (size_t j = 0; j < k; ++j) {
    chosen[indices[j]] = true;
    chosen_value[indices[j]] = values[j];
  }
  for (size_t i = 0; i < n; ++i) {
    const float rebuilt = chosen[i] ? chosen_value[i] : residual[i];
    CHECK_EQ_MSG(Bits(rebuilt), Bits(input[i]), label << " element " << i);
    if (chosen[i]) CHECK_EQ_MSG(Bits(residual[i]), 0u, label << " residual at sent " << i);
    else CHECK_EQ_MSG(Bits(sent[i]), 0u, label << " sent at unsent " << i);
    // Adding what was sent and what was kept gives the input back too
    // (up to the sign of a zero).
    CHECK_EQ_MSG(sent[i] + residual[i] == input[i], true, label << " sum at " << i);
  }
}

TFDIST_TEST(TopkCountRoundsUpAndClamps) {
  CHECK_EQ(TopkCount(0.05, 1000), size_t{50});
  CHECK_EQ(TopkCount(0.07, 100), size_t{7});
  CHECK_EQ(TopkCount(0.01, 150), size_t{2});
  CHECK_EQ(TopkCount(1e-9, 10), size_t{1});
  CHECK_EQ(TopkCount(1.0, 10), size_t{10});
  CHECK_EQ(TopkCount(0.5, 0), size_t{0});
}

TFDIST_TEST(TopkPicksTheLargestAndKeepsTheRest) {
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t n : {1, 2, 7, 100, 1000, 4099}) {
    std::vector<float> input(n);
    for (float& v : input) v = normal(generator);
    for (size_t k : {size_t{1}, n / 10 + 1, n / 2 + 1, n}) {
      if (k > n) continue;
      CheckSelection(input, k, "normal");
    }
  }
}

TFDIST_TEST(TopkBreaksTiesTowardsTheLowerIndex) {
  // Many equal magnitudes with both signs, zeros and signed zeros.
  std::vector<float> input = {1.0f, -2.0f, 2.0f, 0.0f, -0.0f, -2.0f, 1.0f, 2.0f, -1.0f, 0.5f};
  for (size_t k = 1; k <= input.size(); ++k) CheckSelection(input, k, "ties");
  std::vector<int32_t> indices(2);
  std::vector<float> values(2);
  CHECK_OK(TopkSelect(input.data(), input.size(), 2, indices.data(), values.data(), nullptr));
  CHECK_EQ(indices[0], 1);
  CHECK_EQ(indices[1], 2);
  std::vector<float> constant(64, 3.0f);
  for (size_t k : {1, 5, 64}) CheckSelection(constant, k, "constant");
}

TFDIST_TEST(TopkHandlesInfinitiesAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> input = {tiny, -inf, 1e30f, -tiny, inf, 0.0f, -1e-40f};
  for (size_t k = 1; k <= input.size(); ++k) CheckSelection(input, k, "extremes");
}

TFDIST_TEST(TopkSendsNaNFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> input = {1.0f, nan, 5.0f};
  std::vector<int32_t> indices(1);
  std::vector<float> values(1);
  std::vector<float> residual(3);
  CHECK_OK(TopkSelect(input.data(), 3, 1, indices.data(), values.data(), residual.data()));
  CHECK_EQ(indices[0], 1);
  CHECK(std::isnan(values[0]));
  CHECK_EQ(residual[2], 5.0f);
}

TFDIST_TEST(TopkOrdersEveryNaNAboveInfinityAndByIndex) {
  // NaNs of both signs and several payloads are one magnitude, above +-inf.
  uint32_t payloads[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u};
  std::vector<float> nans;
  for (uint32_t bits : payloads) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    nans.push_back(value);
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> input = {2.0f, nans[0], -inf, nans[1], 7.0f, nans[2], inf, nans[3]};
  for (size_t k = 1; k <= input.size(); ++k) {
    std::vector<int32_t> indices(k);
    std::vector<float> values(k);
    std::vector<float> residual(input.size());
    CHECK_OK(TopkSelect(input.data(), input.size(), k, indices.data(), values.data(),
                        residual.data()));
    // Expected order: NaNs at 1, 3, 5, 7; infinities at 2, 6; then 7 (4), then 2 (0).
    const std::vector<int32_t> order = {1, 3, 5, 7, 2, 6, 4, 0};
    std::vector<int32_t> expected(order.begin(), order.begin() + k);
    std::sort(expected.begin(), expected.end());
    CHECK_EQ_MSG(indices == expected, true, "k=" << k);
    for (size_t j = 0; j < k; ++j) CHECK_EQ(Bits(values[j]), Bits(input[indices[j]]));
  }
}

TFDIST_TEST(TopkMatchesTheReferenceOnALargeTensorWithManyTies) {
  // Larger than the caches, values on a coarse grid so that the k-th magnitude
  // is shared by many entries on both sides of the cut.
  std::mt19937 generator(11);
  std::uniform_int_distribution<int> level(-40, 40);
  std::vector<float> input(1 << 20);
  for (float& v : input) v = 0.25f * static_cast<float>(level(generator));
  for (size_t k : {size_t{1}, size_t{1000}, size_t{10486}, input.size() / 3}) {
    CheckSelection(input, k, "grid");
  }
}

TFDIST_TEST(TopkResidualMayAliasItsInput) {
  std::vector<float> input = {0.1f, -3.0f, 2.0f, 0.2f};
  std::vector<float> state = input;
  std::vector<int32_t> indices(2);
  std::vector<float> values(2);
  CHECK_OK(TopkSelect(state.data(), 4, 2, indices.data(), values.data(), state.data()));
  CHECK_EQ(values[0], -3.0f);
  CHECK_EQ(values[1], 2.0f);
  CHECK_EQ(state[0], 0.1f);
  CHECK_EQ(state[1], 0.0f);
  CHECK_EQ(state[3], 0.2f);
}

TFDIST_TEST(TopkRejectsKAboveN) {
  std::vector<float> input(3, 1.0f);
  std::vector<int32_t> indices(4);
  std::vector<float> values(4);
  CHECK(!TopkSelect(input.data(), 3, 4, indices.data(), values.data(), nullptr).ok());
}

// Momentum correction against a step-by-step reference, over several steps:
// velocity = m*velocity + g, residual += velocity, the k largest of the
// residual go out, and residual and velocity are both zeroed there.
TFDIST_TEST(TopkWithMomentumCorrectsAndMasks) {
  const size_t n = 257, k = 9;
  const float momentum = 0.9f;
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> velocity(n, 0.0f), residual(n, 0.0f);
  std::vector<float> ref_velocity(n, 0.0f), ref_residual(n, 0.0f);
  std::vector<int32_t> indices(k);
  std::vector<float> values(k);
  for (int step = 0; step < 6; ++step) {
    std::vector<float> gradient(n);
    for (float& v : gradient) v = normal(generator);
    for (size_t i = 0; i < n; ++i) {
      ref_velocity[i] = momentum * ref_velocity[i] + gradient[i];
      ref_residual[i] = ref_residual[i] + ref_velocity[i];
    }
    const std::vector<float> accumulated = ref_residual;
    CHECK_OK(TopkSelectWithMomentum(gradient.data(), n, k, momentum, velocity.data(),
                                    residual.data(), indices.data(), values.data()));
    CHECK_EQ_MSG(indices == ReferenceTopk(accumulated, k), true, "step " << step);
    std::vector<bool> chosen(n, false);
    for (size_t j = 0; j < k; ++j) {
      chosen[indices[j]] = true;
      CHECK_EQ_MSG(Bits(values[j]), Bits(accumulated[indices[j]]), "value " << j);
    }
    for (size_t i = 0; i < n; ++i) {
      // Sent or kept, bit for bit the accumulated residual; velocity masked.
      if (chosen[i]) {
        ref_residual[i] = 0.0f;
        ref_velocity[i] = 0.0f;
      }
      CHECK_EQ_MSG(Bits(residual[i]), Bits(ref_residual[i]), "residual " << i);
      CHECK_EQ_MSG(Bits(velocity[i]), Bits(ref_velocity[i]), "velocity " << i);
      if (!chosen[i]) CHECK_EQ_MSG(Bits(residual[i]), Bits(accumulated[i]), "kept " << i);
    }
  }
  // Momentum 0 is plain error feedback; velocity then holds the last gradient.
  std::vector<float> g = {0.5f, -4.0f, 1.0f};
  std::vector<float> u(3, 7.0f), r = {1.0f, 1.0f, 1.0f};
  CHECK_OK(TopkSelectWithMomentum(g.data(), 3, 1, 0.0f, u.data(), r.data(), indices.data(),
                                  values.data()));
  CHECK_EQ(indices[0], 1);
  CHECK_EQ(values[0], -3.0f);
  CHECK_EQ(r[0], 1.5f);
  CHECK_EQ(r[1], 0.0f);
  CHECK_EQ(u[0], 0.5f);
  CHECK_EQ(u[1], 0.0f);
  // A rejected call leaves the state as it was.
  CHECK(!TopkSelectWithMomentum(g.data(), 3, 4, 0.9f, u.data(), r.data(), indices.data(),
                                values.data()).ok());
  CHECK_EQ(r[0], 1.5f);
  CHECK_EQ(u[0], 0.5f);
}

TFDIST_TEST(ScatterAddSumsInOrderAndChecksBounds) {
  std::vector<float> dense(4, 0.0f);
  const std::vector<int32_t> indices = {0, 2, 2, 3, 0};
  const std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f, 0.5f};
  CHECK_OK(ScatterAdd(indices.data(), values.data(), 5, dense.data(), 4));
  CHECK_EQ(dense[0], 1.5f);
  CHECK_EQ(dense[1], 0.0f);
  CHECK_EQ(dense[2], 5.0f);
  CHECK_EQ(dense[3], 4.0f);
  const std::vector<int32_t> bad = {1, 4};
  const tfdist::Status status = ScatterAdd(bad.data(), values.data(), 2, dense.data(), 4);
  CHECK(!status.ok());
  CHECK_EQ(dense[1], 0.0f);  // untouched on error
}

}  // namespace
}  // namespace tfdist_test
