#include "cc/core/tuning/network_cost_codec.h"

#include <cmath>
#include <string>
#include <utility>

namespace tfdist {

namespace {

// More points, or distances (2^32 ranks), than any calibration measures: a
// count beyond them is garbage.
constexpr double kMaxPoints = 64;
constexpr double kMaxDistances = 32;

// A count at values[*offset], within [1, most].
Status ReadCount(const std::vector<double>& values, size_t* offset, double most,
                 const std::string& what, size_t* count) {
  if (*offset >= values.size()) return Status::InvalidArgument(what + " is missing");
  const double value = values[(*offset)++];
  if (!(value >= 1 && value <= most) || value != std::floor(value)) {
    return Status::InvalidArgument(what + ": bad count");
  }
  *count = static_cast<size_t>(value);
  return Status::OK();
}

}  // namespace

void AppendStepCosts(const StepCosts& costs, std::vector<double>* out) {
  for (const std::vector<CostCurve>& by_distance : costs.curves) {
    out->push_back(static_cast<double>(by_distance.size()));
    for (const CostCurve& curve : by_distance) {
      out->push_back(static_cast<double>(curve.points().size()));
      for (const CostPoint& point : curve.points()) {
        out->push_back(point.bytes);
        out->push_back(point.seconds);
      }
    }
  }
}

std::vector<double> EncodeNetworkCost(const NetworkCost& network) {
  std::vector<double> values;
  AppendStepCosts(network.intra, &values);
  AppendStepCosts(network.inter, &values);
  return values;
}

Status DecodeStepCosts(const std::vector<double>& values, size_t* offset, StepCosts* out) {
  StepCosts costs;
  for (int kind = 0; kind < kStepKinds; ++kind) {
    const std::string what = std::string("network cost: ") + StepKindName(kind);
    size_t distances = 0;
    TFDIST_RETURN_IF_ERROR(ReadCount(values, offset, kMaxDistances, what, &distances));
    for (size_t distance = 0; distance < distances; ++distance) {
      size_t count = 0;
      TFDIST_RETURN_IF_ERROR(ReadCount(values, offset, kMaxPoints, what, &count));
      if (*offset + 2 * count > values.size()) {
        return Status::InvalidArgument(what + ": points missing");
      }
      std::vector<CostPoint> points;
      for (size_t i = 0; i < count; ++i) {
        points.push_back({values[*offset], values[*offset + 1]});
        *offset += 2;
      }
      CostCurve curve(std::move(points));
      if (!curve.Valid()) {
        return Status::InvalidArgument(what + ": sizes or seconds out of order");
      }
      costs.at(static_cast<StepKind>(kind), static_cast<int>(distance)) = std::move(curve);
    }
  }
  *out = std::move(costs);
  return Status::OK();
}

Status DecodeNetworkCost(const std::vector<double>& values, NetworkCost* out) {
  size_t offset = 0;
  NetworkCost network;
  TFDIST_RETURN_IF_ERROR(DecodeStepCosts(values, &offset, &network.intra));
  TFDIST_RETURN_IF_ERROR(DecodeStepCosts(values, &offset, &network.inter));
  if (offset != values.size()) {
    return Status::InvalidArgument("network cost: " + std::to_string(values.size() - offset) +
                                   " values after the two link classes");
  }
  *out = std::move(network);
  return Status::OK();
}

}  // namespace tfdist
