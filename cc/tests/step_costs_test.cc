// The step curves: interpolation between measured sizes, the survey's linear
// curves and their summary, the inter-host rule past the measured sizes, and
// the flat form the C API and the cache use.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cc/core/tuning/network_cost_codec.h"
#include "cc/core/tuning/step_costs.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::CostCurve;
using tfdist::LinkClass;
using tfdist::NetworkCost;
using tfdist::StepCosts;
using tfdist::StepKind;

bool Near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::fabs(b) + 1e-18; }

}  // namespace

TFDIST_TEST(CostCurveInterpolatesBetweenMeasuredSizes) {
  const CostCurve curve({{8, 1e-6}, {1024, 3e-6}, {65536, 1e-5}});
  CHECK(curve.Valid());
  CHECK(Near(curve.At(8), 1e-6));
  CHECK(Near(curve.At(0), 1e-6));  // never below the smallest measured
  CHECK(Near(curve.At(516), 2e-6));
  CHECK(Near(curve.At(1024), 3e-6));
  CHECK(Near(curve.At(65536), 1e-5));
  // Beyond the last point: the last two points' line continued.
  CHECK(Near(curve.At(65536 + (65536 - 1024)), 1.7e-5));
  CHECK(Near(curve.last_slope(), 7e-6 / (65536 - 1024)));
  CHECK_EQ(curve.last_bytes(), 65536.0);
  CHECK_EQ(CostCurve().At(100), 0.0);
  const CostCurve linear = CostCurve::Linear(2e-6, 1e-10);
  CHECK(Near(linear.At(0), 2e-6));
  CHECK(Near(linear.At(1e9), 2e-6 + 0.1));
  CHECK(!CostCurve({{8, 1e-6}, {8, 2e-6}}).Valid());
  CHECK(!CostCurve({{1024, 1e-6}, {8, 2e-6}}).Valid());
  CHECK(!CostCurve({{8, -1e-6}}).Valid());
  CHECK(!CostCurve({{8, NAN}}).Valid());
}

TFDIST_TEST(LinearStepCostsAreTheSurveysAndSummarizeBack) {
  const tfdist::LinkCost link = {1e-6, 1e-10, 3e-10};
  const StepCosts costs = StepCosts::FromLinkCost(link);
  CHECK(costs.Valid());
  const double n = 1e6;
  CHECK(Near(costs.of(StepKind::kHop).At(n), 1e-6 + 1e-4));
  CHECK(Near(costs.of(StepKind::kExchange).At(n), 1e-6 + 1e-4));
  CHECK(Near(costs.of(StepKind::kHopReduce).At(n), 1e-6 + 4e-4));
  CHECK(Near(costs.of(StepKind::kExchangeReduce).At(n), 1e-6 + 4e-4));
  // A ring reduces each segment while the next is on the wire, in half of
  // its steps: (R - G) / 2 more per byte, where reducing is the slower.
  CHECK(Near(costs.of(StepKind::kRing).At(n), 1e-6 + 1e-4 + 1e-4));
  CHECK(Near(StepCosts::FromLinkCost({1e-6, 3e-10, 1e-10}).of(StepKind::kRing).At(n),
             1e-6 + 3e-4));
  const tfdist::LinkCost back = tfdist::Summarize(costs);
  CHECK(Near(back.latency_s, 1e-6));
  CHECK(Near(back.seconds_per_byte, 1e-10));
  CHECK(Near(back.reduce_seconds_per_byte, 3e-10));
  // By hand across hosts: the inter class reduces at the host's R.
  const NetworkCost network = tfdist::LinearNetwork(link, {5e-5, 8e-10, 0.0});
  CHECK(Near(network.inter.of(StepKind::kExchangeReduce).At(n), 5e-5 + n * (8e-10 + 3e-10)));
}

TFDIST_TEST(InterHostStepsPastTheMeasuredSizes) {
  // Measured between hosts up to 1 MiB: 50 us + 0.8 ns/B, reductions adding
  // 0.3 ns/B. Within the host: a slow copy (2 ns/B: it dominates copying
  // past 1 MiB) and a reduction of 1 ns/B.
  const double top = 1 << 20;
  StepCosts inter;
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    const bool reduces = kind == static_cast<int>(StepKind::kHopReduce) ||
                         kind == static_cast<int>(StepKind::kExchangeReduce);
    const double per_byte = reduces ? 1.1e-9 : 8e-10;
    inter.at(static_cast<StepKind>(kind)) =
        CostCurve({{8, 50e-6 + 8 * per_byte}, {top, 50e-6 + top * per_byte}});
  }
  NetworkCost network{StepCosts::FromLinkCost({1e-6, 2e-9, 1e-9}), inter};
  auto step = [&](LinkClass link, StepKind kind, double bytes) {
    return tfdist::StepSeconds(network, link, kind, bytes);
  };
  // Within the measured sizes: the measurement itself.
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    CHECK(Near(step(LinkClass::kInterHost, static_cast<StepKind>(kind), top / 2),
               inter.of(static_cast<StepKind>(kind)).At(top / 2)));
  }
  CHECK(Near(step(LinkClass::kIntraHost, StepKind::kHop, 64 << 20), 1e-6 + (64 << 20) * 2e-9));
  // Past them, where the link is slower than the host's copy: the link's
  // line, plus the host's reduction after an exchange or a hop; a ring step
  // reduces while the link streams, so the slower of the two.
  const double m = 64 << 20;
  const double link = 50e-6 + m * 8e-10;
  network.intra = StepCosts::FromLinkCost({1e-6, 1e-10, 1e-9});
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kHop, m), link));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kExchange, m), link));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kRing, m), link));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kHopReduce, m), link + m * 1e-9));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kExchangeReduce, m), link + m * 1e-9));

  // Where the host's copy is slower than the link, the bytes go at its pace.
  network.intra = StepCosts::FromLinkCost({1e-6, 2e-9, 1e-9});
  const double host = 1e-6 + m * 2e-9;
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kExchange, m), host));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kExchangeReduce, m), host + m * 1e-9));
  CHECK(Near(step(LinkClass::kInterHost, StepKind::kRing, m), host));
}

TFDIST_TEST(StepCostsKeepACurvePerDistance) {
  StepCosts costs = StepCosts::FromLinkCost({1e-6, 1e-10, 0.0});
  costs.at(StepKind::kExchange, 2) = CostCurve({{8, 7e-6}});
  CHECK_EQ(costs.curves[static_cast<int>(StepKind::kExchange)].size(), size_t{3});
  CHECK(!costs.Valid());  // distance index 1 was added empty
  costs.at(StepKind::kExchange, 1) = CostCurve({{8, 5e-6}});
  CHECK(costs.Valid());
  CHECK(Near(costs.of(StepKind::kExchange, 1).At(8), 5e-6));
  CHECK(Near(costs.of(StepKind::kExchange, 9).At(8), 7e-6));  // past the last: the last
  CHECK(Near(costs.of(StepKind::kHop, 3).At(0), 1e-6));       // one curve serves all
  CHECK_EQ(StepCosts().of(StepKind::kHop).At(8), 0.0);
  // A far distance measured to 16 MiB follows distance 1's curve past it.
  costs.at(StepKind::kHop, 0) = CostCurve({{8, 1e-6}, {16 << 20, 2e-3}, {64 << 20, 12e-3}});
  costs.at(StepKind::kHop, 1) = CostCurve({{8, 2e-6}, {16 << 20, 3e-3}});
  CHECK(Near(costs.Seconds(StepKind::kHop, 1, 64 << 20), 3e-3 + (12e-3 - 2e-3)));
  CHECK(Near(costs.Seconds(StepKind::kHop, 1, 8 << 20), costs.of(StepKind::kHop, 1).At(8 << 20)));
  CHECK(Near(costs.Seconds(StepKind::kHop, 0, 64 << 20), 12e-3));
  CHECK_EQ(tfdist::DistanceIndex(1), 0);
  CHECK_EQ(tfdist::DistanceIndex(2), 1);
  CHECK_EQ(tfdist::DistanceIndex(3), 1);
  CHECK_EQ(tfdist::DistanceIndex(4), 2);
}

// What decides whether a cached calibration is measured again: the median
// of the cached prices over a fresh sample's, point by point.
TFDIST_TEST(MedianSlowdownComparesCurvesPointByPoint) {
  StepCosts sample;
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    sample.at(static_cast<StepKind>(kind)) = CostCurve({{8, 1e-6}, {65536, 10e-6}});
  }
  // The same curves: no slowdown.
  CHECK(Near(tfdist::MedianSlowdown(sample, sample), 1.0));
  // A cache measured 4x slower everywhere reads as 4x.
  StepCosts slow;
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    slow.at(static_cast<StepKind>(kind)) =
        CostCurve({{8, 4e-6}, {1024, 8e-6}, {65536, 40e-6}, {1 << 20, 400e-6}});
  }
  CHECK(Near(tfdist::MedianSlowdown(slow, sample), 4.0));
  // The other way round: a check 4x slower than the cache (a busy moment
  // now) reads as 1/4, and keeps the cache.
  CHECK(Near(tfdist::MedianSlowdown(sample, slow), 0.25));
  // One point caught by a slow moment does not decide: 9 of 10 points agree.
  StepCosts one_bad = sample;
  one_bad.at(StepKind::kRing) = CostCurve({{8, 100e-6}, {65536, 10e-6}});
  CHECK(Near(tfdist::MedianSlowdown(one_bad, sample), 1.0));
  // Each distance is compared with the cache's curve at that distance.
  StepCosts far = sample;
  far.at(StepKind::kExchange, 1) = CostCurve({{8, 3e-6}, {65536, 30e-6}});
  StepCosts far_sample;
  far_sample.at(StepKind::kExchange, 1) = CostCurve({{8, 1e-6}, {65536, 10e-6}});
  CHECK(Near(tfdist::MedianSlowdown(far, far_sample), 3.0));
  CHECK(Near(tfdist::MedianSlowdown(far, sample), 1.0));  // the sample has no distance 1
  CHECK(Near(tfdist::MedianSlowdown(sample, StepCosts()), 1.0));  // nothing measured
}

TFDIST_TEST(NetworkCostRoundTripsThroughDoubles) {
  NetworkCost network{StepCosts::FromLinkCost({1e-6, 1e-10, 3e-10}),
                      StepCosts::FromLinkCost({5e-5, 8e-10, 3e-10})};
  network.intra.at(StepKind::kHop) = CostCurve({{8, 1e-6}, {4096, 2e-6}, {1 << 20, 1e-4}});
  network.intra.at(StepKind::kHop, 1) = CostCurve({{8, 3e-6}, {4096, 4e-6}});
  const std::vector<double> values = tfdist::EncodeNetworkCost(network);
  NetworkCost decoded;
  CHECK_OK(tfdist::DecodeNetworkCost(values, &decoded));
  for (int link = 0; link < 2; ++link) {
    const StepCosts& sent = link == 0 ? network.intra : network.inter;
    const StepCosts& back = link == 0 ? decoded.intra : decoded.inter;
    for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
      CHECK_EQ(back.curves[kind].size(), sent.curves[kind].size());
      for (size_t d = 0; d < std::min(back.curves[kind].size(), sent.curves[kind].size()); ++d) {
        const auto& a = sent.curves[kind][d].points();
        const auto& b = back.curves[kind][d].points();
        CHECK_EQ(b.size(), a.size());
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
          CHECK_EQ(b[i].bytes, a[i].bytes);
          CHECK_EQ(b[i].seconds, a[i].seconds);
        }
      }
    }
  }
  // Short, long, or with points out of order: refused.
  std::vector<double> broken(values.begin(), values.end() - 1);
  CHECK(!tfdist::DecodeNetworkCost(broken, &decoded).ok());
  broken = values;
  broken.push_back(1.0);
  CHECK(!tfdist::DecodeNetworkCost(broken, &decoded).ok());
  broken = values;
  broken[0] = 0;  // no curve for the hop
  CHECK(!tfdist::DecodeNetworkCost(broken, &decoded).ok());
  broken = values;
  broken[1] = 0;  // a curve of no points
  CHECK(!tfdist::DecodeNetworkCost(broken, &decoded).ok());
  broken = values;
  broken[4] = broken[2];  // the hop's second size equal to its first
  CHECK(!tfdist::DecodeNetworkCost(broken, &decoded).ok());
}

}  // namespace tfdist_test
