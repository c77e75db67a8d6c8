// The step calibration over threads as ranks: every rank gets the same
// curves, they are sane, an emulated link is seen where it is, and bad
// requests are refused.
#include <algorithm>
#include <chrono>
#include <vector>

#include "cc/core/tuning/step_calibration.h"
#include "cc/core/transport/emulated_link_transport.h"
#include "cc/testing/in_process_transport.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::HostLayout;
using tfdist::LinkClass;
using tfdist::StepCosts;
using tfdist::StepKind;

bool SameCurves(const StepCosts& a, const StepCosts& b) {
  for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
    if (a.curves[kind].size() != b.curves[kind].size()) return false;
    for (size_t d = 0; d < a.curves[kind].size(); ++d) {
      const auto& x = a.curves[kind][d].points();
      const auto& y = b.curves[kind][d].points();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i].bytes != y[i].bytes || x[i].seconds != y[i].seconds) return false;
      }
    }
  }
  return true;
}

const std::vector<size_t> kSmallSizes = {8, 4096, 65536};

}  // namespace

TFDIST_TEST(MeasureStepCostsAgreesAcrossRanks) {
  for (int size : {2, 3, 4}) {
    std::vector<StepCosts> measured(size);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<tfdist::Status> statuses =
        tfdist::RunOnThreads(size, [&](tfdist::Transport& transport) {
          return tfdist::MeasureStepCosts(transport, HostLayout(size), LinkClass::kIntraHost,
                                          kSmallSizes, &measured[transport.rank()]);
        });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double limit = kUnderThreadSanitizer ? 20.0 : 2.0;  // TSan: ~10x slower
    CHECK_EQ_MSG(seconds < limit, true, "P=" << size << " took " << seconds << " s");
    for (int rank = 0; rank < size; ++rank) {
      CHECK_OK(statuses[rank]);
      CHECK_EQ_MSG(SameCurves(measured[rank], measured[0]), true, "P=" << size << " rank " << rank);
    }
    const StepCosts& costs = measured[0];
    CHECK(costs.Valid());
    // A ring step has a chunk per member, up to the largest size, in at
    // most 64 MiB.
    const size_t ring_top = std::min<size_t>(kSmallSizes.back(), (size_t{64} << 20) / size);
    std::vector<size_t> ring_sizes;
    for (size_t bytes : kSmallSizes) {
      if (bytes < ring_top) ring_sizes.push_back(bytes);
    }
    ring_sizes.push_back(ring_top);
    // A curve per distance 1, 2, ... below the group's size; ring steps one.
    const size_t distances = size >= 4 ? 2 : 1;
    for (int kind = 0; kind < tfdist::kStepKinds; ++kind) {
      const bool ring = kind == static_cast<int>(StepKind::kRing);
      CHECK_EQ_MSG(costs.curves[kind].size(), ring ? size_t{1} : distances,
                   tfdist::StepKindName(kind) << " P=" << size);
      const std::vector<size_t>& sizes = ring ? ring_sizes : kSmallSizes;
      for (const tfdist::CostCurve& curve : costs.curves[kind]) {
        const auto& points = curve.points();
        CHECK_EQ_MSG(points.size(), sizes.size(), tfdist::StepKindName(kind));
        for (size_t i = 0; i < std::min(points.size(), sizes.size()); ++i) {
          CHECK_EQ(points[i].bytes, static_cast<double>(sizes[i]));
          CHECK_EQ_MSG(points[i].seconds > 0, true, tfdist::StepKindName(kind) << " " << i);
          if (i > 0) CHECK(points[i].seconds >= points[i - 1].seconds);
        }
      }
    }
  }
}

TFDIST_TEST(StepCostsSeeTheEmulatedLink) {
  // 2 x 2 hosts over 1 Gb/s, 100 us emulated links: the inter class measures
  // them (within what a loaded machine allows), the intra class does not.
  const HostLayout layout = HostLayout::Consecutive(4, 2);
  const tfdist::EmulatedLink link{1.25e8, 100e-6};
  const std::vector<size_t> inter_sizes = {8, 65536, 262144};
  std::vector<tfdist::NetworkCost> measured(4);
  const std::vector<tfdist::Status> statuses =
      tfdist::RunOnThreads(4, [&](tfdist::Transport& inner) {
        tfdist::EmulatedLinkTransport transport(inner, layout.host_of_rank(), link);
        tfdist::NetworkCost& cost = measured[inner.rank()];
        // Between hosts first, as the runtime's calibration measures them.
        TFDIST_RETURN_IF_ERROR(tfdist::MeasureStepCosts(transport, layout, LinkClass::kInterHost,
                                                        inter_sizes, &cost.inter));
        return tfdist::MeasureStepCosts(transport, layout, LinkClass::kIntraHost, kSmallSizes,
                                        &cost.intra);
      });
  for (const tfdist::Status& status : statuses) CHECK_OK(status);
  const tfdist::NetworkCost& cost = measured[0];
  // Never faster than emulated: every step waits for its message's modelled
  // arrival, so each measured size costs at least the link's latency plus
  // its bytes at the link's rate, exactly. A slope between two sizes has no
  // such bound (a late wake-up at the smaller size flattens it: ASan once
  // measured 5.9e-9 s/B on a busy machine), so only the points are bounded
  // below. The upper bounds only catch a link priced grossly wrong, so they
  // leave room for four threads sharing two loaded cores. Sanitizers slow
  // every copy by a factor that depends on the load (TSan measured 11x on a
  // busy machine), so under them the upper bounds would test the machine,
  // not the model: the plain build keeps them.
  const bool sanitized = kUnderThreadSanitizer || kUnderAddressSanitizer;
  const double clock_slack = 1e-6;  // steady_clock rounding over a run
  for (StepKind kind : {StepKind::kHop, StepKind::kExchange, StepKind::kRing}) {
    const tfdist::CostCurve& curve = cost.inter.of(kind);
    for (size_t bytes : inter_sizes) {
      const double floor = link.latency_s + static_cast<double>(bytes) / link.bytes_per_second;
      CHECK_EQ_MSG(curve.At(static_cast<double>(bytes)) >= floor - clock_slack, true,
                   tfdist::StepKindName(static_cast<int>(kind))
                       << " " << bytes << " B in " << curve.At(static_cast<double>(bytes))
                       << " s, under the emulated " << floor << " s");
    }
    const double latency = curve.At(8);
    const double per_byte = (curve.At(262144) - curve.At(65536)) / (262144 - 65536);
    CHECK_EQ_MSG(sanitized || latency < 2e-3, true,
                 tfdist::StepKindName(static_cast<int>(kind)) << " latency " << latency);
    CHECK_EQ_MSG(sanitized || per_byte < 2e-8, true,
                 tfdist::StepKindName(static_cast<int>(kind)) << " seconds/byte " << per_byte);
    CHECK(cost.intra.of(kind).At(8) < latency);
  }
  for (int rank = 1; rank < 4; ++rank) {
    CHECK(SameCurves(measured[rank].inter, cost.inter));
    CHECK(SameCurves(measured[rank].intra, cost.intra));
  }
}

TFDIST_TEST(MeasureStepCostsRefusesWhatItCannotMeasure) {
  const std::vector<tfdist::Status> statuses =
      tfdist::RunOnThreads(2, [&](tfdist::Transport& transport) {
        StepCosts costs;
        // One host has no pair across hosts; two hosts of one rank none within.
        const tfdist::Status across = tfdist::MeasureStepCosts(
            transport, HostLayout(2), LinkClass::kInterHost, kSmallSizes, &costs);
        const tfdist::Status within = tfdist::MeasureStepCosts(
            transport, HostLayout::Consecutive(2, 2), LinkClass::kIntraHost, kSmallSizes, &costs);
        const tfdist::Status odd = tfdist::MeasureStepCosts(
            transport, HostLayout(2), LinkClass::kIntraHost, {8, 1001}, &costs);
        const tfdist::Status mismatch = tfdist::MeasureStepCosts(
            transport, HostLayout(3), LinkClass::kIntraHost, kSmallSizes, &costs);
        for (const tfdist::Status& status : {across, within, odd, mismatch}) {
          if (status.code() != tfdist::StatusCode::kInvalidArgument) {
            return tfdist::Status::Internal("expected InvalidArgument, got " + status.message());
          }
        }
        return tfdist::Status::OK();
      });
  for (const tfdist::Status& status : statuses) CHECK_OK(status);
}

}  // namespace tfdist_test
