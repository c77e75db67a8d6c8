// A cost that depends on message size, as a handful of measured points with
// straight lines between them (PLogP, Kielmann et al. 2000: the parameters of
// a message are functions of its size, measured at a few sizes and
// interpolated). On shared memory the cost per byte is anything but constant:
// Open MPI copies messages up to 4 KiB in and out of shared buffers, larger
// ones once (CMA, a system call and page pinning per message), and a message
// that fits the core's cache moves at several times the speed of one that
// does not. One (latency, seconds per byte) pair fitted at two sizes misses
// every size between and beyond them by a multiple; a curve through measured
// points does not.
#ifndef TFDIST_CORE_TUNING_COST_CURVE_H_
#define TFDIST_CORE_TUNING_COST_CURVE_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace tfdist {

struct CostPoint {
  double bytes;
  double seconds;
};

class CostCurve {
 public:
  // Empty: At() returns 0.
  CostCurve() = default;
  // `points` sorted by strictly increasing bytes, seconds >= 0 (Valid()).
  explicit CostCurve(std::vector<CostPoint> points) : points_(std::move(points)) {}
  // The survey's model of one message: latency + bytes * seconds_per_byte,
  // for every size (its points lie at 0 and far beyond any message).
  static CostCurve Linear(double latency_s, double seconds_per_byte);

  // Seconds at `bytes`: the measured value at a measured size, on the line
  // between the two neighbouring points in between; below the first point
  // its value (a message never costs less than the smallest one measured);
  // beyond the last point, the last two points' line continued.
  double At(double bytes) const;

  bool empty() const { return points_.empty(); }
  const std::vector<CostPoint>& points() const { return points_; }
  // The largest size measured (0 when empty).
  double last_bytes() const { return points_.empty() ? 0.0 : points_.back().bytes; }
  // Seconds per byte between the last two points (0 with fewer than two).
  double last_slope() const;
  // Strictly increasing sizes, finite non-negative values.
  bool Valid() const;

 private:
  std::vector<CostPoint> points_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_COST_CURVE_H_
