// The model, with m = `bytes` and, per link class c, the step curves of
// step_costs.h: hop_c(n), hop_reduce_c(n), exchange_c(n), exchange_reduce_c(n),
// ring_c(n) (StepSeconds: seconds of one step moving n bytes per rank). p2 is
// the largest power of two <= P.
//
//   T_tree = sum over the ceil(log2 P) levels of
//            hop_reduce_c(m) + hop_c(m)                    (once up, once down)
//   T_bfly = sum over the log2(p2) rounds of exchange_reduce_c(m)       + fold
//   T_rabe = sum over the log2(p2) distances d of
//            exchange_reduce_c(m d/p2) + exchange_c(m d/p2) (halving, doubling)
//                                                                       + fold
//   fold   = hop_reduce_c(m) + hop_c(m)            (only when P != p2: the
//            extra ranks' vectors in, and the result back out)
//   T_ring = 2(P-1) * (lambda + max_c [ring_c(m/P) - lambda_c])
//
// where c is the class of the step's pairs, and their distance: a level,
// round or fold costs what its slowest pair's step costs, by that pair's
// class (within a host or across) and the distance between its partners
// (step_costs.h: which ranks share a core decides a pair's cost on an
// oversubscribed machine); one pair across hosts makes a synchronised step
// as slow as the link between hosts. The ring's 2(P-1) steps are one chain of
// hops around the ring rather than synchronised steps: its latency lambda is
// that of the links the chain crosses (lambda_c = ring_c at 0 bytes, a share
// x/P of the links between hosts: lambda = (x/P) lambda_inter +
// (1 - x/P) lambda_intra), while its segments stream at the pace of the
// slowest link class it uses (the max over the classes of its links). On one
// host T_ring is 2(P-1) ring(m/P). Below 4 bytes per rank (one float32
// element) most chunks are empty and their steps send nothing, so the ring
// is the chain of 2(P-1) hops of the few elements: lambda_c = hop_c(m) and
// nothing streams.
//
// With the survey's curves (StepCosts::FromLinkCost: every step L + nG, a
// reduction + nR, a ring step's pipelined reduction + n max(0, R - G)) these
// are the survey's formulas plus R:
//   T_tree = 2 ceil(log2 P) (L + mG) + ceil(log2 P) mR
//   T_bfly = log2(p2) (L + mG + mR)                      + fold
//   T_rabe = 2L log2(p2) + 2mG (p2-1)/p2 + (p2-1)/p2 mR  + fold
//   T_ring = 2(P-1) (L + (m/P) G) + (P-1)/P m max(0, R - G)
//   fold   = 2 (L + mG) + mR
//
// Measured curves bring what those three numbers cannot: a cost per byte
// that changes with size (shared memory's protocols and caches), and the
// cost of a step with every rank of the machine busy, which decides on a
// machine with more ranks than cores. The tree's levels and the fold are
// chains of hops, each to a rank that waited, which is what hop measures.
//
// Hierarchical (uniform layouts, H hosts of k ranks), pipelined in S
// segments of m/S bytes (hierarchical_allreduce.cc):
//   a = (k-1) ring_intra(m/(Sk))                                      RS
//   x = T(H ranks, m/(Sk), across hosts), the flat algorithm auto
//       picks for it, and x_host the same algorithm on the host's own
//       curves (H ranks on one host)                                  X
//   b = (k-1) ring_intra(m/(Sk))                                      AG
//   T_hier = a + x + b + (S-1) max(a + b + x_host, x) + S handoff
// The caller's thread runs a and b of every segment, a side thread x, so
// after the first segment's reduce-scatter the slower of the two streams
// sets the pace and the faster is hidden -- but what the cross-host phase
// costs the host (moving its bytes through memory and reducing them) shares
// the host's cores with a and b, so it is hidden only behind the wire time
// (with as many ranks as cores, hierarchical ran well above what the wire
// alone would allow). Each segment costs one hand-over between the
// threads. S is the argmin (HierarchicalSegments).
#include "cc/core/tuning/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "cc/core/collectives/power_of_two_fold.h"

namespace tfdist {
namespace {

constexpr AllreduceAlgorithm kFlatCandidates[] = {
    AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
    AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree};

// Whether the model offers `algorithm` on `layout` at all. At two ranks the
// tree's reduce to rank 0 and broadcast back are the butterfly's one
// exchange sent as two messages in turn (the same bytes and reduction,
// twice the hops), so it cannot be faster; yet a calibration can price two
// hops below one exchange, and a call of it costs 1.3-2x the butterfly's
// (docs/cost_model.md, "auto on the user's path"). At more ranks the tree
// runs fewer pairs at once than the butterfly, which can pay on few cores.
bool Offered(AllreduceAlgorithm algorithm, const HostLayout& layout) {
  return !(algorithm == AllreduceAlgorithm::kTree && layout.size() == 2);
}

// One layout's steps: what a step of given pairs costs.
class Steps {
 public:
  Steps(const HostLayout& layout, const NetworkCost& network)
      : layout_(layout), network_(network) {}

  // A synchronised step of `pairs`: the slowest of its pairs, by the class
  // and the distance of each (step_costs.h): local ranks within a host,
  // host numbers between hosts.
  double Cost(const std::vector<std::pair<int, int>>& pairs, StepKind kind, double bytes) const {
    double seconds = 0.0;
    for (const auto& [a, b] : pairs) {
      const bool across = !layout_.same_host(a, b);
      const int distance = across ? std::abs(layout_.host_of(a) - layout_.host_of(b))
                                  : std::abs(layout_.local_rank(a) - layout_.local_rank(b));
      seconds = std::max(seconds, Cost(across ? LinkClass::kInterHost : LinkClass::kIntraHost,
                                       kind, bytes, DistanceIndex(distance)));
    }
    return seconds;
  }
  double Cost(LinkClass link, StepKind kind, double bytes, int distance_index = 0) const {
    return StepSeconds(network_, link, kind, bytes, distance_index);
  }
  const HostLayout& layout() const { return layout_; }

 private:
  const HostLayout& layout_;
  const NetworkCost& network_;
};

// A level of a chain of hops: a message in, reduced, and one back out (a
// tree level, the fold).
double Hops(const Steps& steps, const std::vector<std::pair<int, int>>& pairs, double m) {
  return steps.Cost(pairs, StepKind::kHopReduce, m) + steps.Cost(pairs, StepKind::kHop, m);
}

double PredictTree(const Steps& steps, double m) {
  const int size = steps.layout().size();
  double seconds = 0.0;
  for (int mask = 1; mask < size; mask <<= 1) {
    std::vector<std::pair<int, int>> pairs;
    for (int rank = 0; rank + mask < size; rank += 2 * mask) pairs.emplace_back(rank, rank + mask);
    // The same pairs once up (reduce) and once down (broadcast).
    seconds += Hops(steps, pairs, m);
  }
  return seconds;
}

// PowerOfTwoFold's two whole-vector messages: in (reduced) and back out.
double PredictFold(const Steps& steps, double m) {
  const int size = steps.layout().size();
  const PowerOfTwoFold fold(0, size);
  const int extra = size - fold.group_size();
  if (extra == 0) return 0.0;
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < extra; ++i) pairs.emplace_back(2 * i, 2 * i + 1);
  return Hops(steps, pairs, m);
}

// The XOR partners of one round of the power-of-two phase at `distance`.
std::vector<std::pair<int, int>> XorPairs(const PowerOfTwoFold& fold, int distance) {
  std::vector<std::pair<int, int>> pairs;
  for (int v = 0; v < fold.group_size(); ++v) {
    if ((v & distance) == 0) pairs.emplace_back(fold.RealRank(v), fold.RealRank(v ^ distance));
  }
  return pairs;
}

double PredictButterfly(const Steps& steps, double m) {
  const PowerOfTwoFold fold(0, steps.layout().size());
  double seconds = PredictFold(steps, m);
  for (int distance = 1; distance < fold.group_size(); distance <<= 1) {
    seconds += steps.Cost(XorPairs(fold, distance), StepKind::kExchangeReduce, m);
  }
  return seconds;
}

double PredictRabenseifner(const Steps& steps, double m) {
  const PowerOfTwoFold fold(0, steps.layout().size());
  const double p2 = fold.group_size();
  double seconds = PredictFold(steps, m);
  for (int distance = 1; distance < fold.group_size(); distance <<= 1) {
    // Halving at this distance moves (and reduces) distance/p2 of the vector,
    // and the allgather round at the same distance moves as much back.
    const double part = m * distance / p2;
    const std::vector<std::pair<int, int>> pairs = XorPairs(fold, distance);
    seconds += steps.Cost(pairs, StepKind::kExchangeReduce, part) +
               steps.Cost(pairs, StepKind::kExchange, part);
  }
  return seconds;
}

// The ring's chain of hops (file comment): latency from the links it
// crosses, streaming at the pace of its slowest class.
double PredictRing(const Steps& steps, double m) {
  const int size = steps.layout().size();
  int crossing = 0;
  for (int rank = 0; rank < size; ++rank) {
    crossing += !steps.layout().same_host(rank, (rank + 1) % size);
  }
  const double P = size;
  const double chunk = m / P;
  std::vector<LinkClass> used;
  if (crossing < size) used.push_back(LinkClass::kIntraHost);
  if (crossing > 0) used.push_back(LinkClass::kInterHost);
  // Below one 4-byte element per rank most chunks are empty, and a step
  // with an empty chunk sends nothing (ring_pipeline.h): what is left is
  // the few elements' chain of 2(P-1) one-way hops around the ring.
  const bool tiny = chunk < 4.0;
  double latency = 0.0;
  double streaming = 0.0;
  for (LinkClass link : used) {
    const double own_latency =
        tiny ? steps.Cost(link, StepKind::kHop, m) : steps.Cost(link, StepKind::kRing, 0.0);
    const double share = link == LinkClass::kInterHost ? crossing / P : 1.0 - crossing / P;
    latency += share * own_latency;
    if (!tiny) {
      streaming = std::max(streaming, steps.Cost(link, StepKind::kRing, chunk) - own_latency);
    }
  }
  return 2.0 * (P - 1.0) * (latency + streaming);
}

double PredictFlat(AllreduceAlgorithm algorithm, const HostLayout& layout, double m,
                   const NetworkCost& network) {
  const Steps steps(layout, network);
  switch (algorithm) {
    case AllreduceAlgorithm::kTree: return PredictTree(steps, m);
    case AllreduceAlgorithm::kButterfly: return PredictButterfly(steps, m);
    case AllreduceAlgorithm::kRing: return PredictRing(steps, m);
    case AllreduceAlgorithm::kRabenseifner: return PredictRabenseifner(steps, m);
    default: break;
  }
  return std::numeric_limits<double>::infinity();
}

// The modelled-fastest flat algorithm (ChooseAllreduce without
// hierarchical, whose cross-host phase this is).
AllreduceAlgorithm ChooseFlat(const HostLayout& layout, size_t bytes, const NetworkCost& network) {
  AllreduceAlgorithm best = kFlatCandidates[0];
  double best_seconds = std::numeric_limits<double>::infinity();
  for (AllreduceAlgorithm candidate : kFlatCandidates) {
    if (!Offered(candidate, layout)) continue;
    const double seconds = PredictFlat(candidate, layout, static_cast<double>(bytes), network);
    if (seconds < best_seconds) {  // strict: ties keep the earlier candidate
      best = candidate;
      best_seconds = seconds;
    }
  }
  return best;
}

// Handing one segment's cross-host allreduce to the side thread and waiting
// for it: two condition-variable wake-ups, each a wait for a core where
// ranks outnumber them.
constexpr double kSegmentHandoffSeconds = 50e-6;
// Segments below this gain nothing from overlap that their latency and
// hand-over do not cost again: each segment pays a hand-over and a
// latency-bound allreduce across hosts, and with small segments those fixed
// costs outweigh the overlap.
constexpr size_t kMinSegmentBytes = size_t{2} << 20;
constexpr int kMaxSegments = 64;

// Seconds of hierarchical allreduce in `segments` pipeline segments.
double PredictHierarchicalSegmented(const HostLayout& layout, double m,
                                    const NetworkCost& network, int segments) {
  const double S = segments;
  const double k = layout.ranks_per_host();
  const double shard = m / S / k;
  // The reduce-scatter and the allgather within the host: the two halves
  // of a ring allreduce of the segment among the host's k ranks.
  const double within =
      (k - 1.0) * StepSeconds(network, LinkClass::kIntraHost, StepKind::kRing, shard);
  const double reduce_scatter = within;
  const double allgather = within;
  // One rank per host, every step between hosts: the cross-host phase with
  // the flat algorithm the model picks for it (as the algorithm does), and
  // what its steps cost the host itself -- the same steps on the host's own
  // curves (the bytes pass through the host's memory and are reduced there,
  // and with emulated links they are copied by the real transport).
  const HostLayout cross = HostLayout::Consecutive(layout.host_count(), layout.host_count());
  const size_t shard_bytes = static_cast<size_t>(std::ceil(shard));
  const AllreduceAlgorithm flat = ChooseFlat(cross, shard_bytes, network);
  const double crossing = PredictFlat(flat, cross, shard, network);
  if (segments == 1) return reduce_scatter + crossing + allgather;
  const double crossing_host =
      PredictFlat(flat, HostLayout(layout.host_count()), shard, UniformNetwork(network.intra));
  return reduce_scatter + crossing + allgather +
         (S - 1.0) * std::max(reduce_scatter + allgather + crossing_host, crossing) +
         S * kSegmentHandoffSeconds;
}

double PredictHierarchical(const HostLayout& layout, size_t bytes, const NetworkCost& network) {
  if (!layout.uniform() || layout.host_count() < 2) {
    return std::numeric_limits<double>::infinity();
  }
  return PredictHierarchicalSegmented(layout, static_cast<double>(bytes), network,
                                      HierarchicalSegments(layout, bytes, network));
}

}  // namespace

int HierarchicalSegments(const HostLayout& layout, size_t bytes, const NetworkCost& network) {
  if (!layout.uniform() || layout.host_count() < 2 || layout.ranks_per_host() < 2) return 1;
  const int most = static_cast<int>(
      std::clamp<size_t>(bytes / kMinSegmentBytes, 1, static_cast<size_t>(kMaxSegments)));
  // One segment is all a small vector can have: no need to price it.
  if (most == 1) return 1;
  const double m = static_cast<double>(bytes);
  int best = 1;
  double best_seconds = PredictHierarchicalSegmented(layout, m, network, 1);
  for (int segments = 2; segments <= most; ++segments) {
    const double seconds = PredictHierarchicalSegmented(layout, m, network, segments);
    if (seconds < best_seconds) {  // strict: ties keep fewer segments
      best = segments;
      best_seconds = seconds;
    }
  }
  return best;
}

double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, const HostLayout& layout,
                               size_t bytes, const NetworkCost& network) {
  if (layout.size() <= 1) return 0.0;
  if (algorithm == AllreduceAlgorithm::kHierarchical) {
    return PredictHierarchical(layout, bytes, network);
  }
  return PredictFlat(algorithm, layout, static_cast<double>(bytes), network);
}

double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link) {
  if (size <= 1) return 0.0;
  return PredictAllreduceSeconds(algorithm, HostLayout(size), bytes, UniformNetwork(link));
}

std::vector<RankedAlgorithm> RankAllreduce(const HostLayout& layout, size_t bytes,
                                           const NetworkCost& network) {
  std::vector<RankedAlgorithm> ranked;
  if (layout.size() <= 1) return ranked;
  // With one rank per host, hierarchical is its cross-host phase alone, the
  // flat algorithm the loop already prices: skip it (hierarchical asks this
  // for its own cross-host phase on every call). On one host it is a reduce
  // and a broadcast, never faster than the flat algorithms: not worth a trial.
  const bool hierarchical_differs =
      layout.uniform() && layout.ranks_per_host() > 1 && layout.host_count() > 1;
  for (AllreduceAlgorithm candidate :
       {AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
        AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree, AllreduceAlgorithm::kHierarchical}) {
    if (candidate == AllreduceAlgorithm::kHierarchical && !hierarchical_differs) continue;
    if (!Offered(candidate, layout)) continue;
    ranked.push_back({candidate, PredictAllreduceSeconds(candidate, layout, bytes, network)});
  }
  // Stable: exact ties keep the order above (fewest messages first).
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const RankedAlgorithm& a, const RankedAlgorithm& b) {
                     return a.predicted_seconds < b.predicted_seconds;
                   });
  return ranked;
}

AllreduceAlgorithm ChooseAllreduce(const HostLayout& layout, size_t bytes,
                                   const NetworkCost& network) {
  if (layout.size() <= 1) return AllreduceAlgorithm::kButterfly;
  return RankAllreduce(layout, bytes, network).front().algorithm;
}

AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link) {
  return ChooseAllreduce(HostLayout(size > 0 ? size : 1), bytes, UniformNetwork(link));
}

}  // namespace tfdist
