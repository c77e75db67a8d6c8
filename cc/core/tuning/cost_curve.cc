#include "cc/core/tuning/cost_curve.h"

#include <algorithm>
#include <cmath>

namespace tfdist {

namespace {

// Far beyond any message (1 TiB), so that a linear curve is never extrapolated.
constexpr double kLinearRangeBytes = 1099511627776.0;

double OnLine(const CostPoint& a, const CostPoint& b, double bytes) {
  return a.seconds + (b.seconds - a.seconds) * (bytes - a.bytes) / (b.bytes - a.bytes);
}

}  // namespace

CostCurve CostCurve::Linear(double latency_s, double seconds_per_byte) {
  return CostCurve({{0.0, latency_s},
                    {kLinearRangeBytes, latency_s + kLinearRangeBytes * seconds_per_byte}});
}

double CostCurve::At(double bytes) const {
  if (points_.empty()) return 0.0;
  if (points_.size() == 1 || bytes <= points_.front().bytes) return points_.front().seconds;
  if (bytes >= points_.back().bytes) {
    return std::max(0.0, OnLine(points_[points_.size() - 2], points_.back(), bytes));
  }
  const auto above = std::upper_bound(
      points_.begin(), points_.end(), bytes,
      [](double value, const CostPoint& point) { return value < point.bytes; });
  return OnLine(*(above - 1), *above, bytes);
}

double CostCurve::last_slope() const {
  if (points_.size() < 2) return 0.0;
  const CostPoint& a = points_[points_.size() - 2];
  const CostPoint& b = points_.back();
  return (b.seconds - a.seconds) / (b.bytes - a.bytes);
}

bool CostCurve::Valid() const {
  for (size_t i = 0; i < points_.size(); ++i) {
    const CostPoint& point = points_[i];
    if (!std::isfinite(point.bytes) || !std::isfinite(point.seconds) || point.bytes < 0 ||
        point.seconds < 0) {
      return false;
    }
    if (i > 0 && !(point.bytes > points_[i - 1].bytes)) return false;
  }
  return true;
}

}  // namespace tfdist
