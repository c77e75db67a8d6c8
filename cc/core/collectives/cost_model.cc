// The cost model, with m*gamma = `bytes`:
//   T_tree = 2 * ceil(log2 P) * (L + m*G)              + ceil(log2 P) * m*R
//   T_bfly = log2(p2) * (L + m*G + m*R)                + fold
//   T_ring = 2(P-1) * (L + (m/P)*G)                    + (P-1)/P * m*max(0, R-G)
//   T_rabe = 2L * log2(p2) + 2m*G * (p2-1)/p2          + (p2-1)/p2 * m*R + fold
// where p2 is the largest power of two <= P and, when P != p2,
//   fold = 2 * (L + m*G) + m*R
// for the two whole-vector messages of PowerOfTwoFold (one in, one out) and
// the reduction of the folded-in vector.
//
// With R = 0 these are the survey's formulas. The R terms count the bytes each
// algorithm reduces on its critical path. The segmented ring reduces one
// segment while the next one arrives (ring_pipeline.h), so its reduction
// only costs time where it is slower than the wire: max(0, R - G) per byte.
// For a power of two these are exactly the survey's formulas. For other P the
// binomial tree really has ceil(log2 P) levels, while butterfly and
// Rabenseifner run their XOR phase on p2 ranks (floor(log2 P) rounds) plus the
// fold: charging ceil(log2 P) rounds *and* the fold would count one round
// twice, so the model follows what the code does.
#include "cc/core/collectives/cost_model.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/collectives/collective_tags.h"
#include "cc/core/collectives/reduction.h"

namespace tfdist {
namespace {

int CeilLog2(int value) {
  int log = 0;
  while ((1 << log) < value) ++log;
  return log;
}

int FloorLog2(int value) {
  int log = 0;
  while ((2 << log) <= value) ++log;
  return log;
}

}  // namespace

double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link) {
  if (size <= 1) return 0.0;
  const double L = link.latency_s;
  const double G = link.seconds_per_byte;
  const double m = static_cast<double>(bytes);
  const double P = static_cast<double>(size);
  const int log_p2 = FloorLog2(size);
  const double p2 = static_cast<double>(1 << log_p2);
  const double R = link.reduce_seconds_per_byte;
  const double fold = (size == (1 << log_p2)) ? 0.0 : 2.0 * (L + m * G) + m * R;

  switch (algorithm) {
    case AllreduceAlgorithm::kTree:
      return 2.0 * CeilLog2(size) * (L + m * G) + CeilLog2(size) * m * R;
    case AllreduceAlgorithm::kButterfly:
      return log_p2 * (L + m * G + m * R) + fold;
    case AllreduceAlgorithm::kRing:
      return 2.0 * (P - 1.0) * (L + (m / P) * G) +
             (P - 1.0) / P * m * std::max(0.0, R - G);
    case AllreduceAlgorithm::kRabenseifner:
      return 2.0 * L * log_p2 + 2.0 * m * G * (p2 - 1.0) / p2 +
             (p2 - 1.0) / p2 * m * R + fold;
    case AllreduceAlgorithm::kAuto:
    case AllreduceAlgorithm::kMpi:
      break;
  }
  return std::numeric_limits<double>::infinity();
}

AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link) {
  constexpr AllreduceAlgorithm kCandidates[] = {
      AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
      AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree};
  if (size <= 1) return AllreduceAlgorithm::kButterfly;
  AllreduceAlgorithm best = kCandidates[0];
  double best_seconds = PredictAllreduceSeconds(best, size, bytes, link);
  for (AllreduceAlgorithm candidate : kCandidates) {
    const double seconds = PredictAllreduceSeconds(candidate, size, bytes, link);
    if (seconds < best_seconds) {  // strict: ties keep the earlier candidate
      best = candidate;
      best_seconds = seconds;
    }
  }
  return best;
}

namespace {

constexpr size_t kLatencyProbeBytes = 8;
constexpr size_t kBandwidthProbeBytes = size_t{4} << 20;  // 4 MiB
constexpr int kReduceRounds = 5;
constexpr int kLatencyWarmups = 3;
constexpr int kLatencyRounds = 21;
constexpr int kBandwidthWarmups = 1;
constexpr int kBandwidthRounds = 5;
// Floors that keep a coarse clock or a zero-copy transport from producing a
// zero or negative parameter, which would make the model degenerate.
constexpr double kMinLatencySeconds = 1e-9;
constexpr double kMinSecondsPerByte = 1e-13;

double Median(std::vector<double> values) {
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  return values[middle];
}

// Rank 0 sends and waits for the echo; rank 1 echoes. Returns rank 0's median
// round-trip time (rank 1 returns 0).
Status MedianRoundTrip(Transport& transport, unsigned char* buffer, size_t bytes,
                       int warmups, int rounds, double* seconds) {
  const bool initiator = transport.rank() == 0;
  const int peer = initiator ? 1 : 0;
  std::vector<double> samples;
  for (int round = 0; round < warmups + rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    if (initiator) {
      TFDIST_RETURN_IF_ERROR(transport.Send(peer, buffer, bytes, kLinkCostTag));
      TFDIST_RETURN_IF_ERROR(transport.Recv(peer, buffer, bytes, kLinkCostTag));
    } else {
      TFDIST_RETURN_IF_ERROR(transport.Recv(peer, buffer, bytes, kLinkCostTag));
      TFDIST_RETURN_IF_ERROR(transport.Send(peer, buffer, bytes, kLinkCostTag));
    }
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    if (round >= warmups) samples.push_back(elapsed.count());
  }
  *seconds = initiator ? Median(std::move(samples)) : 0.0;
  return Status::OK();
}

// Median time per byte of reducing a float32 vector of kBandwidthProbeBytes
// into another, both larger than most caches, like gradients.
double MedianReduceSecondsPerByte() {
  const size_t count = kBandwidthProbeBytes / sizeof(float);
  std::vector<float> accumulator(count, 1.0f), incoming(count, 2.0f);
  std::vector<double> samples;
  for (int round = 0; round < kReduceRounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    ReduceInto(accumulator.data(), incoming.data(), count, DataType::kFloat32,
               ReduceOp::kSum);
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start;
    samples.push_back(elapsed.count() / static_cast<double>(kBandwidthProbeBytes));
  }
  return Median(std::move(samples));
}

}  // namespace

Status MeasureLinkCost(Transport& transport, LinkCost* out) {
  if (transport.size() == 1) {
    *out = kDefaultLinkCost;
    return Status::OK();
  }
  // {L, G, R} as rank 0 measured them; broadcast as raw doubles (all ranks
  // run the same binary, so the representation agrees).
  double measured[3] = {0.0, 0.0, 0.0};
  if (transport.rank() <= 1) {
    std::vector<unsigned char> probe(kBandwidthProbeBytes, 0);
    double small_round_trip = 0.0;
    double large_round_trip = 0.0;
    TFDIST_RETURN_IF_ERROR(MedianRoundTrip(transport, probe.data(),
                                           kLatencyProbeBytes, kLatencyWarmups,
                                           kLatencyRounds, &small_round_trip));
    TFDIST_RETURN_IF_ERROR(MedianRoundTrip(
        transport, probe.data(), kBandwidthProbeBytes, kBandwidthWarmups,
        kBandwidthRounds, &large_round_trip));
    const double latency = std::max(small_round_trip / 2.0, kMinLatencySeconds);
    const double large_one_way = large_round_trip / 2.0;
    measured[0] = latency;
    measured[1] = std::max((large_one_way - latency) /
                               static_cast<double>(kBandwidthProbeBytes),
                           kMinSecondsPerByte);
    if (transport.rank() == 0) measured[2] = MedianReduceSecondsPerByte();
  }
  TFDIST_RETURN_IF_ERROR(
      BinomialBroadcast(transport, measured, sizeof(measured), /*root=*/0));
  out->latency_s = measured[0];
  out->seconds_per_byte = measured[1];
  out->reduce_seconds_per_byte = measured[2];
  return Status::OK();
}

}  // namespace tfdist
