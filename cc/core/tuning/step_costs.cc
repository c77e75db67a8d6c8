#include "cc/core/tuning/step_costs.h"

#include <algorithm>

namespace tfdist {

namespace {

constexpr const char* kStepKindNames[kStepKinds] = {
    "hop", "hop_reduce", "exchange", "exchange_reduce", "ring"};

// Summarize's sizes: past the eager protocol and in cache on any machine.
constexpr double kSummaryFromBytes = 1 << 20;
constexpr double kSummaryToBytes = 4 << 20;
// Floors that keep a noisy measurement from giving a zero or negative
// parameter, which would make the survey's formulas degenerate.
constexpr double kMinLatencySeconds = 1e-9;
constexpr double kMinSecondsPerByte = 1e-13;

}  // namespace

const char* StepKindName(int kind) {
  return kind >= 0 && kind < kStepKinds ? kStepKindNames[kind] : nullptr;
}

const CostCurve& StepCosts::of(StepKind kind, int distance_index) const {
  static const CostCurve kNone;
  const std::vector<CostCurve>& by_distance = curves[static_cast<int>(kind)];
  if (by_distance.empty()) return kNone;
  const size_t index = static_cast<size_t>(std::max(distance_index, 0));
  return by_distance[std::min(index, by_distance.size() - 1)];
}

double StepCosts::Seconds(StepKind kind, int distance_index, double bytes) const {
  const CostCurve& own = of(kind, distance_index);
  const CostCurve& near = of(kind, 0);
  const double top = own.last_bytes();
  if (bytes <= top || near.last_bytes() <= top) return own.At(bytes);
  return own.At(top) + near.At(bytes) - near.At(top);
}

CostCurve& StepCosts::at(StepKind kind, int distance_index) {
  std::vector<CostCurve>& by_distance = curves[static_cast<int>(kind)];
  const size_t index = static_cast<size_t>(std::max(distance_index, 0));
  if (by_distance.size() <= index) by_distance.resize(index + 1);
  return by_distance[index];
}

bool StepCosts::Valid() const {
  return std::all_of(curves.begin(), curves.end(), [](const std::vector<CostCurve>& by_distance) {
    return !by_distance.empty() &&
           std::all_of(by_distance.begin(), by_distance.end(), [](const CostCurve& curve) {
             return !curve.empty() && curve.Valid();
           });
  });
}

int DistanceIndex(int distance) {
  int index = 0;
  while (distance > 1) {
    distance >>= 1;
    ++index;
  }
  return index;
}

StepCosts StepCosts::FromLinkCost(const LinkCost& link) {
  const double L = link.latency_s;
  const double G = link.seconds_per_byte;
  const double R = link.reduce_seconds_per_byte;
  StepCosts costs;
  costs.at(StepKind::kHop) = CostCurve::Linear(L, G);
  costs.at(StepKind::kHopReduce) = CostCurve::Linear(L, G + R);
  costs.at(StepKind::kExchange) = CostCurve::Linear(L, G);
  costs.at(StepKind::kExchangeReduce) = CostCurve::Linear(L, G + R);
  costs.at(StepKind::kRing) = CostCurve::Linear(L, G + std::max(0.0, R - G) / 2);
  return costs;
}

LinkCost Summarize(const StepCosts& costs) {
  const CostCurve& hop = costs.of(StepKind::kHop);
  const CostCurve& hop_reduce = costs.of(StepKind::kHopReduce);
  LinkCost link;
  link.latency_s = std::max(hop.At(0.0), kMinLatencySeconds);
  link.seconds_per_byte =
      std::max((hop.At(kSummaryToBytes) - hop.At(kSummaryFromBytes)) /
                   (kSummaryToBytes - kSummaryFromBytes),
               kMinSecondsPerByte);
  link.reduce_seconds_per_byte =
      std::max((hop_reduce.At(kSummaryToBytes) - hop.At(kSummaryToBytes)) / kSummaryToBytes, 0.0);
  return link;
}

double MedianSlowdown(const StepCosts& reference, const StepCosts& sample) {
  std::vector<double> ratios;
  for (int kind = 0; kind < kStepKinds; ++kind) {
    const std::vector<CostCurve>& by_distance = sample.curves[kind];
    for (size_t distance = 0; distance < by_distance.size(); ++distance) {
      for (const CostPoint& point : by_distance[distance].points()) {
        if (!(point.seconds > 0)) continue;
        ratios.push_back(reference.Seconds(static_cast<StepKind>(kind),
                                           static_cast<int>(distance), point.bytes) /
                         point.seconds);
      }
    }
  }
  if (ratios.empty()) return 1.0;
  const auto middle = ratios.begin() + ratios.size() / 2;
  std::nth_element(ratios.begin(), middle, ratios.end());
  return *middle;
}

NetworkCost LinearNetwork(const LinkCost& intra, const LinkCost& inter) {
  LinkCost across = inter;
  across.reduce_seconds_per_byte = intra.reduce_seconds_per_byte;
  return {StepCosts::FromLinkCost(intra), StepCosts::FromLinkCost(across)};
}

double StepSeconds(const NetworkCost& network, LinkClass link, StepKind kind, double bytes,
                   int distance_index) {
  const StepCosts& own = link == LinkClass::kIntraHost ? network.intra : network.inter;
  const CostCurve& curve = own.of(kind, distance_index);
  if (link == LinkClass::kIntraHost || bytes <= curve.last_bytes()) {
    return own.Seconds(kind, distance_index, bytes);
  }
  // Between hosts, past the measured sizes (step_costs.h).
  auto within = [&](StepKind k) { return network.intra.Seconds(k, 0, bytes); };
  auto transfer = [&](StepKind k) {
    return std::max(network.inter.of(k, distance_index).At(bytes), within(k));
  };
  auto reducing = [&](StepKind with, StepKind without) {
    return std::max(0.0, within(with) - within(without));
  };
  switch (kind) {
    case StepKind::kHop:
    case StepKind::kExchange:
    case StepKind::kRing:  // a ring's segments are reduced while the next is on the wire
      return transfer(kind);
    case StepKind::kHopReduce:
      return transfer(StepKind::kHop) + reducing(StepKind::kHopReduce, StepKind::kHop);
    case StepKind::kExchangeReduce:
      return transfer(StepKind::kExchange) +
             reducing(StepKind::kExchangeReduce, StepKind::kExchange);
  }
  return own.Seconds(kind, distance_index, bytes);
}

}  // namespace tfdist
