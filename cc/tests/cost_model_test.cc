// The cost model's formulas against hand-computed values -- on the survey's
// linear costs and on measured-looking step curves, on one host and across
// hosts -- and the selector's choices at the two ends of the size range.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cc/core/tuning/cost_model.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::AllreduceAlgorithm;
using tfdist::LinkCost;

constexpr LinkCost kLink = {2e-6, 1e-10};

bool Near(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::fabs(b) + 1e-18; }

double Predict(AllreduceAlgorithm algorithm, int size, size_t bytes) {
  return tfdist::PredictAllreduceSeconds(algorithm, size, bytes, kLink);
}

}  // namespace

TFDIST_TEST(CostModelMatchesHandComputedValues) {
  // P = 8, m = 1e6 bytes: L + mG = 2e-6 + 1e-4 = 1.02e-4.
  CHECK(Near(Predict(AllreduceAlgorithm::kTree, 8, 1000000), 2 * 3 * 1.02e-4));
  CHECK(Near(Predict(AllreduceAlgorithm::kButterfly, 8, 1000000), 3 * 1.02e-4));
  CHECK(Near(Predict(AllreduceAlgorithm::kRing, 8, 1000000),
             14 * (2e-6 + 125000 * 1e-10)));
  CHECK(Near(Predict(AllreduceAlgorithm::kRabenseifner, 8, 1000000),
             2 * 2e-6 * 3 + 2 * 1e-4 * 7.0 / 8.0));
  // P = 6 (p2 = 4, fold = 2 * (L + mG)); tree uses ceil(log2 6) = 3 levels.
  const double fold = 2 * 1.02e-4;
  CHECK(Near(Predict(AllreduceAlgorithm::kTree, 6, 1000000), 2 * 3 * 1.02e-4));
  CHECK(Near(Predict(AllreduceAlgorithm::kButterfly, 6, 1000000),
             2 * 1.02e-4 + fold));
  CHECK(Near(Predict(AllreduceAlgorithm::kRing, 6, 1000000),
             10 * (2e-6 + (1e6 / 6) * 1e-10)));
  CHECK(Near(Predict(AllreduceAlgorithm::kRabenseifner, 6, 1000000),
             2 * 2e-6 * 2 + 2 * 1e-4 * 3.0 / 4.0 + fold));
  // One rank costs nothing; the non-transport algorithms are not modelled.
  CHECK_EQ(Predict(AllreduceAlgorithm::kRing, 1, 1000000), 0.0);
  CHECK(std::isinf(Predict(AllreduceAlgorithm::kMpi, 4, 100)));
  CHECK(std::isinf(Predict(AllreduceAlgorithm::kAuto, 4, 100)));
}

TFDIST_TEST(ReductionTermMatchesHandComputedValues) {
  // L = 1 us, G = 0.1 ns/B, R = 0.3 ns/B, m = 1 MB, P = 4 (p2 = 4, no fold).
  const LinkCost link = {1e-6, 1e-10, 3e-10};
  const double m = 1e6;
  CHECK(Near(tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kTree, 4, 1000000, link),
             2 * 2 * (1e-6 + m * 1e-10) + 2 * m * 3e-10));
  CHECK(Near(tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kButterfly, 4, 1000000, link),
             2 * (1e-6 + m * 1e-10 + m * 3e-10)));
  CHECK(Near(tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kRing, 4, 1000000, link),
             6 * (1e-6 + m / 4 * 1e-10) + 0.75 * m * 2e-10));
  CHECK(Near(tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kRabenseifner, 4, 1000000, link),
             2 * 1e-6 * 2 + 2 * m * 1e-10 * 0.75 + 0.75 * m * 3e-10));
  // P = 2: the survey's formulas tie butterfly with the others on bandwidth and
  // give it fewer messages, so butterfly always wins; with a reduction cost the
  // segmented ring wins from a few KiB on, as measured on shared memory.
  CHECK(tfdist::ChooseAllreduce(2, size_t{64} << 20, kLink) == AllreduceAlgorithm::kButterfly);
  CHECK(tfdist::ChooseAllreduce(2, 64, link) == AllreduceAlgorithm::kButterfly);
  CHECK(tfdist::ChooseAllreduce(2, size_t{64} << 20, link) == AllreduceAlgorithm::kRing);
}

TFDIST_TEST(ChooseAllreducePicksByMessageSize) {
  for (int size : {2, 3, 4, 5, 8, 13, 16, 64}) {
    CHECK_EQ_MSG(static_cast<int>(tfdist::ChooseAllreduce(size, 8, kLink)),
                 static_cast<int>(AllreduceAlgorithm::kButterfly), "P=" << size);
  }
  for (int size : {4, 8, 16, 64, 3, 5, 13}) {
    const AllreduceAlgorithm large =
        tfdist::ChooseAllreduce(size, size_t{64} << 20, kLink);
    CHECK_EQ_MSG(large == AllreduceAlgorithm::kRing ||
                     large == AllreduceAlgorithm::kRabenseifner,
                 true, "P=" << size);
  }
  // Powers of two: Rabenseifner has the ring's bandwidth term and fewer
  // messages; small odd P: the fold makes the ring cheaper.
  CHECK(tfdist::ChooseAllreduce(8, size_t{64} << 20, kLink) ==
        AllreduceAlgorithm::kRabenseifner);
  CHECK(tfdist::ChooseAllreduce(3, size_t{64} << 20, kLink) ==
        AllreduceAlgorithm::kRing);
  CHECK(tfdist::ChooseAllreduce(1, 1000, kLink) == AllreduceAlgorithm::kButterfly);
  // The choice is the argmin of the predictions.
  for (int size : {2, 3, 6, 8, 12, 16}) {
    for (size_t bytes : {size_t{0}, size_t{100}, size_t{10000}, size_t{1} << 20,
                         size_t{100} << 20}) {
      const AllreduceAlgorithm chosen = tfdist::ChooseAllreduce(size, bytes, kLink);
      for (AllreduceAlgorithm other :
           {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
            AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner}) {
        CHECK(Predict(chosen, size, bytes) <= Predict(other, size, bytes));
      }
    }
  }
}

TFDIST_TEST(TwoLinkModelChargesStepsThatCrossHosts) {
  using tfdist::HostLayout;
  using tfdist::NetworkCost;
  const LinkCost intra = {1e-6, 1e-10, 2e-10};
  const LinkCost inter = {1e-5, 8e-9, 0.0};
  // The inter-host class reduces at the host's R (2e-10), not its own 0.
  const NetworkCost network = tfdist::LinearNetwork(intra, inter);
  const double m = 1 << 20;
  auto predict = [&](AllreduceAlgorithm algorithm, const HostLayout& layout) {
    return tfdist::PredictAllreduceSeconds(algorithm, layout, size_t{1} << 20, network);
  };
  // One host: the one-link formulas on the intra link.
  for (AllreduceAlgorithm algorithm : {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
                                       AllreduceAlgorithm::kRing,
                                       AllreduceAlgorithm::kRabenseifner}) {
    CHECK(Near(predict(algorithm, HostLayout(6)),
               tfdist::PredictAllreduceSeconds(algorithm, 6, size_t{1} << 20, intra)));
  }
  CHECK(std::isinf(predict(AllreduceAlgorithm::kHierarchical, HostLayout(4))));
  // 2 x 2 hosts: the ring's chain of hops crosses hosts on 2 of its 4 links;
  // its segments stream at the inter-host pace, the reduction hides behind it.
  const HostLayout two_by_two = HostLayout::Consecutive(4, 2);
  CHECK(Near(predict(AllreduceAlgorithm::kRing, two_by_two),
             6 * (0.5 * 1e-5 + 0.5 * 1e-6 + m / 4 * 8e-9)));
  // Butterfly on 4 x 2: distance 1 within hosts, distances 2 and 4 across.
  const HostLayout four_by_two = HostLayout::Consecutive(8, 2 * 2);
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, four_by_two),
             (1e-6 + m * 1e-10) + 2 * (1e-5 + m * 8e-9) + 3 * m * 2e-10));
  // Rabenseifner on 4 x 2: the halves (distance 4, 2) cross, the quarter-steps
  // at distance 1 stay within a host.
  CHECK(Near(predict(AllreduceAlgorithm::kRabenseifner, four_by_two),
             2 * (1e-6 + m / 8 * 1e-10) + m / 8 * 2e-10 +
                 2 * (1e-5 + m / 4 * 8e-9) + m / 4 * 2e-10 +
                 2 * (1e-5 + m / 2 * 8e-9) + m / 2 * 2e-10));
  // Hierarchical on 2 x 2, pipelined in S segments: per segment a ring
  // reduce-scatter (a) and allgather (b) of two shards within a host, and the
  // best flat algorithm for one shard across two hosts (x); the slower
  // stream sets the pace, each segment costs one 50 us hand-over.
  const int S = tfdist::HierarchicalSegments(two_by_two, size_t{1} << 20, network);
  CHECK_EQ(S, 1);  // 1 MiB: segments would be below 2 MiB
  const double segment = m / S;
  const double b = 1e-6 + segment / 2 * 1e-10;
  const double a = b + 0.5 * segment * 1e-10;
  const LinkCost across = {1e-5, 8e-9, 2e-10};
  double x = 1e9;
  for (AllreduceAlgorithm flat : {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
                                  AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner}) {
    x = std::min(x, tfdist::PredictAllreduceSeconds(flat, 2, (size_t{1} << 19) / S, across));
  }
  const double pipelined =
      S == 1 ? a + x + b : a + x + b + (S - 1) * std::max(a + b, x) + S * 50e-6;
  CHECK(Near(predict(AllreduceAlgorithm::kHierarchical, two_by_two), pipelined));
}

TFDIST_TEST(ChooseAllreduceTakesHierarchicalAcrossSlowLinks) {
  using tfdist::HostLayout;
  const tfdist::NetworkCost network = tfdist::LinearNetwork({2e-6, 2e-10, 2e-10}, {5e-5, 8e-9, 0.0});
  const HostLayout four_by_two = HostLayout::Consecutive(8, 4);
  CHECK(tfdist::ChooseAllreduce(four_by_two, size_t{64} << 20, network) ==
        AllreduceAlgorithm::kHierarchical);
  // Tiny messages stay latency-bound: never the three-phase scheme.
  CHECK(tfdist::ChooseAllreduce(four_by_two, 4, network) != AllreduceAlgorithm::kHierarchical);
  // One host: hierarchical is never a candidate.
  CHECK(tfdist::ChooseAllreduce(HostLayout(8), size_t{64} << 20,
                                tfdist::UniformNetwork(network.intra)) !=
        AllreduceAlgorithm::kHierarchical);
  // One rank per host: hierarchical would be its cross-host phase alone, which
  // the flat candidates already are; the choice is the flat one (hierarchical
  // asks this for its own cross-host phase).
  const HostLayout four_by_one = HostLayout::Consecutive(4, 4);
  for (size_t bytes : {size_t{4}, size_t{1} << 20, size_t{64} << 20}) {
    const AllreduceAlgorithm flat = tfdist::ChooseAllreduce(four_by_one, bytes, network);
    CHECK(flat != AllreduceAlgorithm::kHierarchical);
    for (AllreduceAlgorithm other :
         {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRing,
          AllreduceAlgorithm::kRabenseifner}) {
      CHECK(tfdist::PredictAllreduceSeconds(flat, four_by_one, bytes, network) <=
            tfdist::PredictAllreduceSeconds(other, four_by_one, bytes, network));
    }
  }
  // The choice is the argmin over all five.
  for (size_t bytes : {size_t{4}, size_t{4096}, size_t{1} << 20, size_t{64} << 20}) {
    const AllreduceAlgorithm chosen = tfdist::ChooseAllreduce(four_by_two, bytes, network);
    for (AllreduceAlgorithm other :
         {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRing,
          AllreduceAlgorithm::kRabenseifner, AllreduceAlgorithm::kHierarchical}) {
      CHECK(tfdist::PredictAllreduceSeconds(chosen, four_by_two, bytes, network) <=
            tfdist::PredictAllreduceSeconds(other, four_by_two, bytes, network));
    }
  }
}


namespace {

using tfdist::CostCurve;
using tfdist::StepCosts;
using tfdist::StepKind;

// Curves unlike any linear model and unlike each other, so that a formula
// that takes the wrong kind of step, or the wrong size, is caught: each kind
// k costs (k + 1) us at 8 B, (k + 1) * 3 us at 4 KiB and (k + 1) * 50 us at
// 1 MiB, and beyond that goes on at 1 MiB's pace.
StepCosts DistinctCurves(double scale) {
  StepCosts costs;
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    const double unit = scale * (kind + 1) * 1e-6;
    costs.at(static_cast<StepKind>(kind)) =
        CostCurve({{8, unit}, {4096, 3 * unit}, {1 << 20, 50 * unit}});
  }
  return costs;
}

double At(const StepCosts& costs, StepKind kind, double bytes) {
  return costs.of(kind).At(bytes);
}

}  // namespace

TFDIST_TEST(StepCurvesMakeThePrediction) {
  const StepCosts curves = DistinctCurves(1.0);
  const tfdist::NetworkCost network = tfdist::UniformNetwork(curves);
  const double m = 64 << 10;
  auto predict = [&](AllreduceAlgorithm algorithm, int size, double bytes) {
    return tfdist::PredictAllreduceSeconds(algorithm, tfdist::HostLayout(size),
                                           static_cast<size_t>(bytes), network);
  };
  const double hops = At(curves, StepKind::kHopReduce, m) + At(curves, StepKind::kHop, m);
  // P = 4: two tree levels, two butterfly rounds of the whole vector,
  // Rabenseifner's rounds on a quarter and a half of it, and the ring's 3 + 3
  // steps on a quarter.
  CHECK(Near(predict(AllreduceAlgorithm::kTree, 4, m), 2 * hops));
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, 4, m),
             2 * At(curves, StepKind::kExchangeReduce, m)));
  CHECK(Near(predict(AllreduceAlgorithm::kRabenseifner, 4, m),
             At(curves, StepKind::kExchangeReduce, m / 4) + At(curves, StepKind::kExchange, m / 4) +
                 At(curves, StepKind::kExchangeReduce, m / 2) +
                 At(curves, StepKind::kExchange, m / 2)));
  CHECK(Near(predict(AllreduceAlgorithm::kRing, 4, m), 6 * At(curves, StepKind::kRing, m / 4)));
  // Below 4 bytes a rank, a ring's steps send nothing but the few
  // elements' hops.
  CHECK(Near(predict(AllreduceAlgorithm::kRing, 4, 8), 6 * At(curves, StepKind::kHop, 8)));
  // P = 3: the fold (in, reduced, and back out) and one round on p2 = 2.
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, 3, m),
             hops + At(curves, StepKind::kExchangeReduce, m)));
  CHECK(Near(predict(AllreduceAlgorithm::kRabenseifner, 3, m),
             hops + At(curves, StepKind::kExchangeReduce, m / 2) +
                 At(curves, StepKind::kExchange, m / 2)));
  CHECK(Near(predict(AllreduceAlgorithm::kTree, 3, m), 2 * hops));
  // Past the last point the curves go on at their last pace: 64 MiB is 64x
  // the 1 MiB step's bytes.
  const double slope = (50.0 - 3.0) * 4e-6 / ((1 << 20) - 4096);  // exchange_reduce
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, 2, 64 << 20),
             200e-6 + slope * ((64 << 20) - (1 << 20))));
  // The argmin of these predictions.
  for (double bytes : {8.0, 4096.0, m, double(64 << 20)}) {
    const AllreduceAlgorithm chosen =
        tfdist::ChooseAllreduce(tfdist::HostLayout(4), static_cast<size_t>(bytes), network);
    for (AllreduceAlgorithm other : {AllreduceAlgorithm::kTree, AllreduceAlgorithm::kButterfly,
                                     AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRabenseifner}) {
      CHECK(predict(chosen, 4, bytes) <= predict(other, 4, bytes));
    }
  }
}

TFDIST_TEST(EachStepCostsItsPairsDistance) {
  // Distance 2 (index 1) costs 10x distance 1 for every pairwise kind: the
  // butterfly's and Rabenseifner's second round, and the tree's second
  // level, pay it; across 2 x 2 hosts the second round crosses, at host
  // distance 1 (index 0) of the inter class.
  const StepCosts near = DistinctCurves(1.0);
  StepCosts costs = near;
  const StepCosts far = DistinctCurves(10.0);
  for (StepKind kind : {StepKind::kHop, StepKind::kHopReduce, StepKind::kExchange,
                        StepKind::kExchangeReduce}) {
    costs.at(kind, 1) = far.of(kind);
  }
  const double m = 64 << 10;
  const tfdist::NetworkCost one_host = tfdist::UniformNetwork(costs);
  auto predict = [&](AllreduceAlgorithm algorithm, const tfdist::HostLayout& layout,
                     const tfdist::NetworkCost& network) {
    return tfdist::PredictAllreduceSeconds(algorithm, layout, static_cast<size_t>(m), network);
  };
  const tfdist::HostLayout four(4);
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, four, one_host),
             At(near, StepKind::kExchangeReduce, m) + At(far, StepKind::kExchangeReduce, m)));
  CHECK(Near(predict(AllreduceAlgorithm::kRabenseifner, four, one_host),
             At(near, StepKind::kExchangeReduce, m / 4) + At(near, StepKind::kExchange, m / 4) +
                 At(far, StepKind::kExchangeReduce, m / 2) + At(far, StepKind::kExchange, m / 2)));
  CHECK(Near(predict(AllreduceAlgorithm::kTree, four, one_host),
             At(near, StepKind::kHopReduce, m) + At(near, StepKind::kHop, m) +
                 At(far, StepKind::kHopReduce, m) + At(far, StepKind::kHop, m)));
  // A distance past the measured ones costs the farthest measured: P = 8's
  // third round (distance 4) is at distance 2's price.
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, tfdist::HostLayout(8), one_host),
             At(near, StepKind::kExchangeReduce, m) + 2 * At(far, StepKind::kExchangeReduce, m)));
  // 2 x 2 hosts: the first round within hosts at distance 1, the second
  // across at host distance 1.
  const StepCosts across = DistinctCurves(100.0);
  const tfdist::NetworkCost two_hosts = {costs, across};
  CHECK(Near(predict(AllreduceAlgorithm::kButterfly, tfdist::HostLayout::Consecutive(4, 2),
                     two_hosts),
             At(near, StepKind::kExchangeReduce, m) + At(across, StepKind::kExchangeReduce, m)));
}

TFDIST_TEST(RingAcrossHostsStreamsAtItsSlowestClass) {
  // 2 x 2 hosts: 2 of the ring's 4 links cross. Its latency is the mean of
  // the two classes' smallest step; it streams at the slower class, which
  // is the host when it reduces slowly behind a fast link, and the link
  // otherwise.
  const double m = 4 << 20;
  const double chunk = m / 4;
  const double latency = 0.5 * 5e-5 + 0.5 * 1e-6;
  auto ring = [&](const LinkCost& intra) {
    const tfdist::NetworkCost network = {StepCosts::FromLinkCost(intra),
                                         StepCosts::FromLinkCost({5e-5, 1e-9, 0.0})};
    return tfdist::PredictAllreduceSeconds(AllreduceAlgorithm::kRing,
                                           tfdist::HostLayout::Consecutive(4, 2),
                                           static_cast<size_t>(m), network);
  };
  // Reducing at 5 ns/B: a ring step costs the host (G + (R - G)/2) per byte.
  CHECK(Near(ring({1e-6, 1e-10, 5e-9}), 6 * (latency + chunk * (1e-10 + 4.9e-9 / 2))));
  // Reducing at 0.2 ns/B: the link's 1 ns/B.
  CHECK(Near(ring({1e-6, 1e-10, 2e-10}), 6 * (latency + chunk * 1e-9)));
}

}  // namespace tfdist_test
