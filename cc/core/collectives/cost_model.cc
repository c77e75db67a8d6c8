// The cost model, with m*gamma = `bytes`, on one link class (L, G, R):
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
//
// Two link classes: every round of tree, butterfly and Rabenseifner, and the
// fold, is a synchronised step, so each costs the L and G of the slowest link
// any of its messages uses (inter-host if one pair of the step is on
// different hosts). The ring's steps are one chain of hops around the ring:
// with c of its P links between hosts,
//   T_ring = 2(P-1) * (L_chain + (m/P)*G_slow) + (P-1)/P * m*max(0, R-G_slow),
//   L_chain = (c/P)*L_inter + (1 - c/P)*L_intra,  G_slow = G_inter if c > 0.
// With every rank on one host these are the formulas above.
// Machine load (NetworkCost): L, G and R are what one pair measured with the
// machine otherwise idle. In a collective every rank on the machine copies
// and reduces at once. So once the collective's buffers (2 * bytes per
// rank, on every rank of the machine) outgrow the last-level cache, G and R
// are the memory costs, measured with every rank busy; below that, G and R
// are multiplied by max(1, ranks_per_machine / cores_per_machine).
// Latencies are the idle pair's: with ranks on every core, a latency
// measured under load is bimodal (microseconds while a pair holds two
// cores, milliseconds when it waits for a scheduler turn), and its median
// swung from 4.5 us to 4 ms between runs at 8 ranks on 2 cores.
//
// Hierarchical (uniform layouts, H hosts of k ranks), pipelined in S
// segments of m/S bytes (hierarchical_allreduce.cc):
//   a = (k-1) * (L_i + (m/Sk)*G_i) + (k-1)/k * (m/S)*max(0, R-G_i)   reduce-scatter
//   x = min over flat algorithms of T(H ranks, m/Sk, inter link)      across hosts
//   b = (k-1) * (L_i + (m/Sk)*G_i)                                    allgather
//   T_hier = a + x + b + (S-1) * max(a + b, x) + S * handoff
// The caller's thread runs a and b of every segment, a side thread x, so
// after the first segment's reduce-scatter the slower of the two streams
// sets the pace and the faster is hidden; each segment costs one hand-over
// between the threads. S is the argmin (HierarchicalSegments).
#include "cc/core/collectives/cost_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/collectives/collective_tags.h"
#include "cc/core/collectives/power_of_two_fold.h"
#include "cc/core/collectives/reduction.h"

namespace tfdist {
namespace {

constexpr AllreduceAlgorithm kFlatCandidates[] = {
    AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
    AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree};

// L and G of one synchronised step: the inter-host link if any of its
// (a, b) pairs crosses hosts.
class StepLinks {
 public:
  StepLinks(const HostLayout& layout, const NetworkCost& network)
      : layout_(layout), network_(network) {}
  const LinkCost& Of(const std::vector<std::pair<int, int>>& pairs) const {
    for (const auto& [a, b] : pairs) {
      if (!layout_.same_host(a, b)) return network_.inter;
    }
    return network_.intra;
  }

 private:
  const HostLayout& layout_;
  const NetworkCost& network_;
};

// Seconds of one message of `bytes` on `link`.
double Message(const LinkCost& link, double bytes) {
  return link.latency_s + bytes * link.seconds_per_byte;
}

double PredictTree(const HostLayout& layout, const StepLinks& links, double m, double R) {
  const int size = layout.size();
  double seconds = 0.0;
  for (int mask = 1; mask < size; mask <<= 1) {
    std::vector<std::pair<int, int>> pairs;
    for (int rank = 0; rank + mask < size; rank += 2 * mask) pairs.emplace_back(rank, rank + mask);
    // The same pairs once up (reduce) and once down (broadcast).
    seconds += 2.0 * Message(links.Of(pairs), m) + m * R;
  }
  return seconds;
}

// The two whole-vector messages of PowerOfTwoFold and the reduction of one.
double PredictFold(const HostLayout& layout, const StepLinks& links, double m, double R) {
  const int size = layout.size();
  const PowerOfTwoFold fold(0, size);
  const int extra = size - fold.group_size();
  if (extra == 0) return 0.0;
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < extra; ++i) pairs.emplace_back(2 * i, 2 * i + 1);
  return 2.0 * Message(links.Of(pairs), m) + m * R;
}

// The XOR partners of one round of the power-of-two phase at `distance`.
std::vector<std::pair<int, int>> XorPairs(const PowerOfTwoFold& fold, int distance) {
  std::vector<std::pair<int, int>> pairs;
  for (int v = 0; v < fold.group_size(); ++v) {
    if ((v & distance) == 0) pairs.emplace_back(fold.RealRank(v), fold.RealRank(v ^ distance));
  }
  return pairs;
}

double PredictButterfly(const HostLayout& layout, const StepLinks& links, double m, double R) {
  const PowerOfTwoFold fold(0, layout.size());
  double seconds = PredictFold(layout, links, m, R);
  for (int distance = 1; distance < fold.group_size(); distance <<= 1) {
    seconds += Message(links.Of(XorPairs(fold, distance)), m) + m * R;
  }
  return seconds;
}

double PredictRabenseifner(const HostLayout& layout, const StepLinks& links, double m,
                           double R) {
  const PowerOfTwoFold fold(0, layout.size());
  const double p2 = fold.group_size();
  double seconds = PredictFold(layout, links, m, R);
  for (int distance = 1; distance < fold.group_size(); distance <<= 1) {
    // Halving at this distance moves (and reduces) distance/p2 of the vector,
    // and the allgather round at the same distance moves as much back.
    const double part = m * distance / p2;
    seconds += 2.0 * Message(links.Of(XorPairs(fold, distance)), part) + part * R;
  }
  return seconds;
}

// The ring's 2(P-1) steps form one chain of hops around the ring, so its
// latency is that of the links the chain crosses (a fraction k/P of them
// between hosts), while its segments stream at the pace of the slowest link.
double PredictRing(const HostLayout& layout, const NetworkCost& network, double m, double R) {
  const int size = layout.size();
  int crossing = 0;
  for (int rank = 0; rank < size; ++rank) crossing += !layout.same_host(rank, (rank + 1) % size);
  const double P = size;
  const double inter_share = crossing / P;
  const double latency = inter_share * network.inter.latency_s +
                         (1.0 - inter_share) * network.intra.latency_s;
  const double G = crossing > 0 ? network.inter.seconds_per_byte : network.intra.seconds_per_byte;
  return 2.0 * (P - 1.0) * (latency + (m / P) * G) + (P - 1.0) / P * m * std::max(0.0, R - G);
}

double PredictFlat(AllreduceAlgorithm algorithm, const HostLayout& layout, double m,
                   const NetworkCost& network) {
  const StepLinks links(layout, network);
  const double R = network.intra.reduce_seconds_per_byte;
  switch (algorithm) {
    case AllreduceAlgorithm::kTree: return PredictTree(layout, links, m, R);
    case AllreduceAlgorithm::kButterfly: return PredictButterfly(layout, links, m, R);
    case AllreduceAlgorithm::kRing: return PredictRing(layout, network, m, R);
    case AllreduceAlgorithm::kRabenseifner: return PredictRabenseifner(layout, links, m, R);
    default: break;
  }
  return std::numeric_limits<double>::infinity();
}

// Handing one segment's cross-host allreduce to the side thread and waiting
// for it: two condition-variable wake-ups, each a wait for a core where
// ranks outnumber them.
constexpr double kSegmentHandoffSeconds = 50e-6;
// Segments below this gain nothing from overlap that their latency and
// hand-over do not cost again: at 2x2 on two cores, 4 MiB in 256 KiB
// segments took twice as long as unsegmented.
constexpr size_t kMinSegmentBytes = size_t{2} << 20;
constexpr int kMaxSegments = 64;

// Seconds of hierarchical allreduce in `segments` pipeline segments.
double PredictHierarchicalSegmented(const HostLayout& layout, double m,
                                    const NetworkCost& network, int segments) {
  const double S = segments;
  const double k = layout.ranks_per_host();
  const LinkCost& intra = network.intra;
  const double segment = m / S;
  const double allgather = (k - 1.0) * Message(intra, segment / k);
  const double reduce_scatter =
      allgather + (k - 1.0) / k * segment *
                      std::max(0.0, intra.reduce_seconds_per_byte - intra.seconds_per_byte);
  // One rank per host, every link between hosts, reducing at the host's R.
  const HostLayout cross = HostLayout::Consecutive(layout.host_count(), layout.host_count());
  NetworkCost across = {network.inter, network.inter};
  across.intra.reduce_seconds_per_byte = intra.reduce_seconds_per_byte;
  across.inter.reduce_seconds_per_byte = intra.reduce_seconds_per_byte;
  const size_t shard = static_cast<size_t>(std::ceil(segment / k));
  double crossing = std::numeric_limits<double>::infinity();
  for (AllreduceAlgorithm flat : kFlatCandidates) {
    crossing = std::min(crossing, PredictAllreduceSeconds(flat, cross, shard, across));
  }
  if (segments == 1) return reduce_scatter + crossing + allgather;
  return reduce_scatter + crossing + allgather +
         (S - 1.0) * std::max(reduce_scatter + allgather, crossing) +
         S * kSegmentHandoffSeconds;
}

double PredictHierarchical(const HostLayout& layout, size_t bytes, const NetworkCost& network) {
  if (!layout.uniform() || layout.host_count() < 2) {
    return std::numeric_limits<double>::infinity();
  }
  return PredictHierarchicalSegmented(layout, static_cast<double>(bytes), network,
                                      HierarchicalSegments(layout, bytes, network));
}

// The network as a collective of `bytes` on every rank sees it (the file
// comment's machine load).
NetworkCost UnderLoad(const NetworkCost& network, size_t bytes) {
  NetworkCost loaded = network;
  LinkCost& intra = loaded.intra;
  const double footprint = 2.0 * static_cast<double>(bytes) * network.ranks_per_machine;
  const bool past_cache = network.cache_bytes > 0 && footprint > network.cache_bytes &&
                          intra.memory_seconds_per_byte > 0 &&
                          intra.memory_reduce_seconds_per_byte > 0;
  if (past_cache) {
    intra.seconds_per_byte = intra.memory_seconds_per_byte;
    intra.reduce_seconds_per_byte = intra.memory_reduce_seconds_per_byte;
  } else if (network.cores_per_machine > 0 &&
             network.ranks_per_machine > network.cores_per_machine) {
    const double sharing =
        static_cast<double>(network.ranks_per_machine) / network.cores_per_machine;
    intra.seconds_per_byte *= sharing;
    intra.reduce_seconds_per_byte *= sharing;
  }
  // Reducing a byte costs the host's R wherever the byte came from.
  loaded.inter.reduce_seconds_per_byte = intra.reduce_seconds_per_byte;
  // Already applied: a second pass must not apply it again.
  loaded.cache_bytes = 0.0;
  loaded.cores_per_machine = 0;
  return loaded;
}

}  // namespace

int HierarchicalSegments(const HostLayout& layout, size_t bytes, const NetworkCost& network) {
  if (!layout.uniform() || layout.host_count() < 2 || layout.ranks_per_host() < 2) return 1;
  const NetworkCost loaded = UnderLoad(network, bytes);
  const int most = static_cast<int>(
      std::clamp<size_t>(bytes / kMinSegmentBytes, 1, static_cast<size_t>(kMaxSegments)));
  const double m = static_cast<double>(bytes);
  int best = 1;
  double best_seconds = PredictHierarchicalSegmented(layout, m, loaded, 1);
  for (int segments = 2; segments <= most; ++segments) {
    const double seconds = PredictHierarchicalSegmented(layout, m, loaded, segments);
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
  const NetworkCost loaded = UnderLoad(network, bytes);
  if (algorithm == AllreduceAlgorithm::kHierarchical) {
    return PredictHierarchical(layout, bytes, loaded);
  }
  return PredictFlat(algorithm, layout, static_cast<double>(bytes), loaded);
}

double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link) {
  if (size <= 1) return 0.0;
  return PredictAllreduceSeconds(algorithm, HostLayout(size), bytes, UniformNetwork(link));
}

AllreduceAlgorithm ChooseAllreduce(const HostLayout& layout, size_t bytes,
                                   const NetworkCost& network) {
  if (layout.size() <= 1) return AllreduceAlgorithm::kButterfly;
  AllreduceAlgorithm best = kFlatCandidates[0];
  double best_seconds = PredictAllreduceSeconds(best, layout, bytes, network);
  for (AllreduceAlgorithm candidate :
       {AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
        AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree,
        AllreduceAlgorithm::kHierarchical}) {
    const double seconds = PredictAllreduceSeconds(candidate, layout, bytes, network);
    if (seconds < best_seconds) {  // strict: ties keep the earlier candidate
      best = candidate;
      best_seconds = seconds;
    }
  }
  return best;
}

AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link) {
  return ChooseAllreduce(HostLayout(size > 0 ? size : 1), bytes, UniformNetwork(link));
}

namespace {

constexpr size_t kLatencyProbeBytes = 8;
constexpr size_t kBandwidthProbeBytes = size_t{4} << 20;  // 4 MiB
constexpr int kReduceRounds = 5;
// Past any last-level cache of today's CPUs, so that bytes come from memory.
constexpr size_t kMemoryProbeBytes = size_t{64} << 20;  // 64 MiB
constexpr int kMemoryWarmups = 1;
constexpr int kMemoryRounds = 2;
constexpr int kLatencyWarmups = 3;
constexpr int kLatencyRounds = 21;
constexpr int kBandwidthWarmups = 1;
constexpr int kBandwidthRounds = 5;
// Floors that keep a coarse clock or a zero-copy transport from producing a
// zero or negative parameter, which would make the model degenerate.
constexpr double kMinLatencySeconds = 1e-9;
constexpr double kMinSecondsPerByte = 1e-13;

// The fastest of several tries: the model describes the link, and on a
// machine shared with other work a try can only be slowed by it (a median
// under load once gave a 5 ms "latency" for a 3 us link).
double Fastest(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}

// This rank and `peer` bounce `bytes` back and forth; the initiator sends
// first. Returns the initiator's round-trip times (the echo returns none).
Status RoundTrips(Transport& transport, int peer, bool initiator, unsigned char* buffer,
                  size_t bytes, int warmups, int rounds, std::vector<double>* samples) {
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
    if (round >= warmups && initiator) samples->push_back(elapsed.count());
  }
  return Status::OK();
}

// Rank 0 sends and waits for the echo; rank `echo` echoes. Returns rank 0's
// fastest round-trip time (the echo returns 0).
Status FastestRoundTrip(Transport& transport, int echo, unsigned char* buffer, size_t bytes,
                       int warmups, int rounds, double* seconds) {
  const bool initiator = transport.rank() == 0;
  std::vector<double> samples;
  TFDIST_RETURN_IF_ERROR(RoundTrips(transport, initiator ? echo : 0, initiator, buffer, bytes,
                                    warmups, rounds, &samples));
  *seconds = initiator ? Fastest(samples) : 0.0;
  return Status::OK();
}

// Fastest time per byte of reducing a float32 vector of kBandwidthProbeBytes
// into another.
double FastestReduceSecondsPerByte() {
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
  return Fastest(samples);
}

}  // namespace

Status MeasureLinkCost(Transport& transport, LinkCost* out) {
  if (transport.size() == 1) {
    *out = kDefaultLinkCost;
    return Status::OK();
  }
  return MeasureLinkCostTo(transport, 1, out);
}

Status MeasureLinkCostTo(Transport& transport, int peer, LinkCost* out) {
  if (peer <= 0 || peer >= transport.size()) {
    return Status::InvalidArgument("link cost: no rank " + std::to_string(peer) +
                                   " to measure against in a group of " +
                                   std::to_string(transport.size()));
  }
  // {L, G, R} as rank 0 measured them; broadcast as raw doubles (all ranks
  // run the same binary, so the representation agrees).
  double measured[3] = {0.0, 0.0, 0.0};
  if (transport.rank() == 0 || transport.rank() == peer) {
    std::vector<unsigned char> probe(kBandwidthProbeBytes, 0);
    double small_round_trip = 0.0;
    double large_round_trip = 0.0;
    TFDIST_RETURN_IF_ERROR(FastestRoundTrip(transport, peer, probe.data(),
                                           kLatencyProbeBytes, kLatencyWarmups,
                                           kLatencyRounds, &small_round_trip));
    TFDIST_RETURN_IF_ERROR(FastestRoundTrip(
        transport, peer, probe.data(), kBandwidthProbeBytes, kBandwidthWarmups,
        kBandwidthRounds, &large_round_trip));
    const double latency = std::max(small_round_trip / 2.0, kMinLatencySeconds);
    const double large_one_way = large_round_trip / 2.0;
    measured[0] = latency;
    measured[1] = std::max((large_one_way - latency) /
                               static_cast<double>(kBandwidthProbeBytes),
                           kMinSecondsPerByte);
    if (transport.rank() == 0) measured[2] = FastestReduceSecondsPerByte();
  }
  TFDIST_RETURN_IF_ERROR(
      BinomialBroadcast(transport, measured, sizeof(measured), /*root=*/0));
  out->latency_s = measured[0];
  out->seconds_per_byte = measured[1];
  out->reduce_seconds_per_byte = measured[2];
  return Status::OK();
}

Status MeasureLinkCostUnderLoad(Transport& transport, const HostLayout& layout,
                                LinkCost* out) {
  // Everyone starts together: the broadcast releases all ranks at once.
  unsigned char go = 1;
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, &go, sizeof go, 0));
  const int me = transport.rank();
  const std::vector<int>& mates = layout.ranks_of_host(layout.host_of(me));
  const int partner_local = layout.local_rank(me) ^ 1;
  const int partner =
      partner_local < static_cast<int>(mates.size()) ? mates[partner_local] : -1;
  const bool initiator = partner >= 0 && me < partner;
  // {memory G, memory R} as rank 0 measured them.
  double measured[2] = {0.0, 0.0};
  {
    std::vector<float> accumulator(kMemoryProbeBytes / sizeof(float), 0.0f);
    unsigned char* probe = reinterpret_cast<unsigned char*>(accumulator.data());
    if (partner >= 0) {
      std::vector<double> large;
      TFDIST_RETURN_IF_ERROR(RoundTrips(transport, partner, initiator, probe, kMemoryProbeBytes,
                                        kMemoryWarmups, kMemoryRounds, &large));
      if (initiator) {
        measured[0] = std::max(Fastest(large) / 2.0 / static_cast<double>(kMemoryProbeBytes),
                               kMinSecondsPerByte);
      }
    }
    // Every rank reduces at once, as in a collective.
    std::vector<float> incoming(accumulator.size(), 2.0f);
    std::vector<double> samples;
    for (int round = 0; round < kMemoryWarmups + kMemoryRounds; ++round) {
      const auto start = std::chrono::steady_clock::now();
      ReduceInto(accumulator.data(), incoming.data(), accumulator.size(), DataType::kFloat32,
                 ReduceOp::kSum);
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      if (round >= kMemoryWarmups) {
        samples.push_back(elapsed.count() / static_cast<double>(kMemoryProbeBytes));
      }
    }
    measured[1] = Fastest(samples);
  }
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, measured, sizeof(measured), /*root=*/0));
  out->memory_seconds_per_byte = measured[0];
  out->memory_reduce_seconds_per_byte = measured[1];
  return Status::OK();
}

Status MeasureNetworkCost(Transport& transport, const HostLayout& layout,
                          NetworkCost* out) {
  if (transport.size() == 1) {
    *out = UniformNetwork(kDefaultLinkCost);
    return Status::OK();
  }
  const std::vector<int>& home = layout.ranks_of_host(layout.host_of(0));
  const int intra_peer = home.size() > 1 ? home[1] : -1;
  int inter_peer = -1;
  for (int rank = 1; rank < layout.size() && inter_peer < 0; ++rank) {
    if (!layout.same_host(0, rank)) inter_peer = rank;
  }
  LinkCost intra{};
  LinkCost inter{};
  if (intra_peer > 0) TFDIST_RETURN_IF_ERROR(MeasureLinkCostTo(transport, intra_peer, &intra));
  if (inter_peer > 0) TFDIST_RETURN_IF_ERROR(MeasureLinkCostTo(transport, inter_peer, &inter));
  if (intra_peer < 0) intra = inter;
  if (inter_peer < 0) inter = intra;
  *out = NetworkCost{intra, inter};
  return Status::OK();
}

}  // namespace tfdist
