#include "cc/core/tuning/step_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/ring_pipeline.h"
#include "cc/core/collectives/tree_allreduce.h"
#include "cc/core/transport/subgroup_transport.h"

namespace tfdist {

namespace {

using Clock = std::chrono::steady_clock;

// Where a tensor's data starts: TensorFlow aligns tensors to 64 bytes, and a
// buffer 16 bytes off a 32-byte boundary (malloc's alignment) makes
// mid-sized steps on shared memory markedly slower (the copies and
// reductions lose their aligned vector loads), so calibrating on such a
// buffer would price every step too high.
constexpr size_t kTensorAlignment = 64;

// `count` floats of 1.0, aligned as a tensor's; freed when it goes. Like
// the std::vector it stands for, it throws std::bad_alloc without memory.
class AlignedFloats {
 public:
  AlignedFloats() = default;
  explicit AlignedFloats(size_t count) : data_(Allocate(count * sizeof(float)), &std::free) {
    std::fill(data_.get(), data_.get() + count, 1.0f);
  }
  float* data() const { return data_.get(); }

 private:
  static float* Allocate(size_t bytes) {
    const size_t rounded =
        std::max<size_t>((bytes + kTensorAlignment - 1) / kTensorAlignment, 1) * kTensorAlignment;
    void* memory = std::aligned_alloc(kTensorAlignment, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    return static_cast<float*>(memory);
  }
  std::unique_ptr<float, decltype(&std::free)> data_{nullptr, &std::free};
};

// The largest size measured at distances past 1 (step_costs.h).
constexpr size_t kFarTopBytes = size_t{16} << 20;

// The most memory a ring step is measured in: one chunk per group member.
constexpr size_t kRingBufferBytes = size_t{64} << 20;

// How hard to try at each size. The tries go round robin over the kinds,
// so that a slow moment of the machine (a rank not scheduled in time)
// slows one try of several kinds rather than every try of one, and go on
// while the size's time budget lasts, up to a most: small steps are cheap
// and their figure wanders with the machine's state, so many tries of
// several steps each, as the benchmark's many calls of a collective take
// its fastest; a large step is long enough to time once per try, and two or
// three tries keep one slow moment from setting the figure. Between hosts,
// where the link sets the time and a step of 1 MiB takes 8 ms at 1 Gb/s,
// fewer. The first try at a size starts with one untimed step, which warms
// the buffers and the transport's paths for that size, as an algorithm's
// earlier calls have (the first exchange between two fresh buffers also
// pays their page faults, which no later call does).
struct Effort {
  int fewest_tries;
  int most_tries;
  double budget_s;  // rank 0 starts no further try past this
  int steps;        // per try, timed one after another, the time per step taken
};
constexpr int kMostTries = 16;

Effort EffortFor(size_t bytes, LinkClass link) {
  const bool across = link == LinkClass::kInterHost;
  if (bytes <= (size_t{64} << 10)) {
    return across ? Effort{3, 8, 0.02, 2} : Effort{5, kMostTries, 0.02, 4};
  }
  if (bytes <= (size_t{1} << 20)) return across ? Effort{2, 2, 0, 1} : Effort{4, 8, 0.03, 2};
  if (bytes <= (size_t{4} << 20)) return {3, 4, 0.1, 1};
  // 16 and 64 MiB: one try where a round of the kinds takes long (eight
  // ranks on two cores), up to three where it does not.
  return {1, 3, 0.25, 1};
}

bool IsRing(StepKind kind) { return kind == StepKind::kRing; }
bool IsHop(StepKind kind) { return kind == StepKind::kHop || kind == StepKind::kHopReduce; }

// The group `rank` takes its synchronised steps in: its host's ranks within
// a host; between hosts, the ranks of its local rank, one per host.
std::vector<int> GroupOf(const HostLayout& layout, int rank, LinkClass link) {
  if (link == LinkClass::kIntraHost) return layout.ranks_of_host(layout.host_of(rank));
  std::vector<int> group;
  for (int host = 0; host < layout.host_count(); ++host) {
    const std::vector<int>& mates = layout.ranks_of_host(host);
    if (layout.local_rank(rank) < static_cast<int>(mates.size())) {
      group.push_back(mates[layout.local_rank(rank)]);
    }
  }
  return group;
}

// The largest group of `link`.
int LargestGroup(const HostLayout& layout, LinkClass link) {
  size_t largest = 1;
  for (int rank = 0; rank < layout.size(); ++rank) {
    largest = std::max(largest, GroupOf(layout, rank, link).size());
  }
  return static_cast<int>(largest);
}

// The pair a hop at distance 2^index is timed on, {-1, -1} for none: within
// a host local ranks 0 and 2^index of the first host that has both; between
// hosts rank 0 and the first rank of host 2^index.
std::pair<int, int> HopPair(const HostLayout& layout, LinkClass link, int index) {
  const int distance = 1 << index;
  if (link == LinkClass::kIntraHost) {
    for (int host = 0; host < layout.host_count(); ++host) {
      const std::vector<int>& mates = layout.ranks_of_host(host);
      if (distance < static_cast<int>(mates.size())) return {mates[0], mates[distance]};
    }
    return {-1, -1};
  }
  if (distance >= layout.host_count()) return {-1, -1};
  return {0, layout.ranks_of_host(distance)[0]};
}

// What is measured: one curve of `kind` at distance 2^distance_index (ring
// steps: index 0, the ring's own neighbours).
struct Series {
  StepKind kind;
  int distance_index;
};

std::vector<Series> PlanSeries(const HostLayout& layout, LinkClass link) {
  // Between hosts one distance: the emulated links, like a flat network,
  // cost the same between any two hosts (each rank has its own modelled
  // NIC), and every curve there costs tens of ms at 1 Gb/s at every init.
  int distances = 0;
  while ((2 << distances) <= LargestGroup(layout, link)) ++distances;
  if (link == LinkClass::kInterHost) distances = std::min(distances, 1);
  std::vector<Series> plan;
  for (int kind = 0; kind < kStepKinds; ++kind) {
    const StepKind step = static_cast<StepKind>(kind);
    if (IsRing(step)) {  // a ring's neighbours are fixed
      plan.push_back({step, 0});
      continue;
    }
    for (int index = 0; index < distances; ++index) {
      if (IsHop(step) && HopPair(layout, link, index).first < 0) break;
      plan.push_back({step, index});
    }
  }
  return plan;
}

// One rank's part of the measurement: its group, its buffers, and how it
// runs each kind of step.
class StepProbe {
 public:
  StepProbe(Transport& transport, const HostLayout& layout, LinkClass link)
      : transport_(transport),
        layout_(layout),
        link_(link),
        group_members_(GroupOf(layout, transport.rank(), link)),
        group_(transport, group_members_) {}

  // The vector of steps of up to `largest` bytes, aligned as a tensor is
  // and touched once (touching fresh memory for every size cost eight ranks
  // on two cores a second at init); a ring's chunks, one per member, lie in
  // it too (the ring steps measured fit). What an exchange or a hop
  // receives goes into a buffer allocated as the algorithms' scratch is
  // (thread_scratch.cc), but this call's own, so that none of it stays.
  void Allocate(size_t largest) {
    front_ = AlignedFloats(largest / sizeof(float));
    scratch_.assign((largest + sizeof(ScratchWord) - 1) / sizeof(ScratchWord), ScratchWord{});
  }
  // The size the next steps move; at most Allocate's.
  void Prepare(size_t bytes) { bytes_ = bytes; }

  // This rank's seconds per step of `series` on the prepared size (0 where
  // it takes no part); `first`: the first try at this size, which starts
  // with an untimed step. Every rank calls it in the same order.
  Status Time(const Series& series, const Effort& effort, bool first, double* seconds) {
    // Everyone starts together: the broadcast releases every rank.
    unsigned char go = 1;
    TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport_, &go, sizeof go, /*root=*/0));
    *seconds = 0.0;
    const bool reduce = series.kind != StepKind::kHop && series.kind != StepKind::kExchange;
    if (IsHop(series.kind)) {
      return PingPong(HopPair(layout_, link_, series.distance_index), reduce, effort, first,
                      seconds);
    }
    if (group_.size() < 2) return Status::OK();
    // A ring run is the group's whole allreduce, 2(P - 1) steps.
    const int per_run = IsRing(series.kind) ? 2 * (group_.size() - 1) : 1;
    const int partner = group_.rank() ^ (1 << series.distance_index);
    auto run = [&]() -> Status { return IsRing(series.kind) ? Ring() : Exchange(partner, reduce); };
    if (first) TFDIST_RETURN_IF_ERROR(run());  // untimed (Effort)
    const Clock::time_point start = Clock::now();
    for (int step = 0; step < effort.steps; ++step) TFDIST_RETURN_IF_ERROR(run());
    *seconds = Seconds(start) / (effort.steps * per_run);
    return Status::OK();
  }

 private:
  static double Seconds(Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  }
  float* front() { return front_.data(); }
  float* back() { return reinterpret_cast<float*>(scratch_.data()); }
  void Reduce() {
    ReduceInto(front(), back(), bytes_ / sizeof(float), DataType::kFloat32, ReduceOp::kSum);
  }

  // Sends the vector and receives the partner's beside it, as butterfly and
  // Rabenseifner do (a rank without a partner at this distance waits); the
  // reducing kind then reduces it into the vector it sends next.
  Status Exchange(int partner, bool reduce) {
    if (partner >= group_.size()) return Status::OK();
    TFDIST_RETURN_IF_ERROR(
        group_.SendRecv(partner, front(), bytes_, partner, back(), bytes_, kLinkCostTag));
    if (reduce) Reduce();
    return Status::OK();
  }

  // A ring allreduce over the group, one chunk per member, as
  // ring_pipeline.h runs it. Each run starts one chunk further on, so that
  // its first step sends a chunk the run before wrote, as a ring's steps do.
  Status Ring() {
    const int members = group_.size();
    RingSchedule schedule;
    for (int chunk = 0; chunk <= members; ++chunk) schedule.chunk_offsets.push_back(chunk * bytes_);
    schedule.element_size = sizeof(float);
    schedule.shift = static_cast<int>(ring_runs_++ % members);
    schedule.reduce_steps = members - 1;
    schedule.copy_steps = members - 1;
    schedule.dtype = DataType::kFloat32;
    schedule.op = ReduceOp::kSum;
    schedule.tag = kLinkCostTag;
    return RunRingSchedule(group_, front(), schedule);
  }

  // `pair.first` sends the vector to `pair.second`, which receives (and
  // reduces) it and sends it back, to be received (and reduced) again: each
  // half of a round trip one hop of a tree, while every other rank waits.
  Status PingPong(std::pair<int, int> pair, bool reduce, const Effort& effort, bool first,
                  double* seconds) {
    const int me = transport_.rank();
    if (me != pair.first && me != pair.second) return Status::OK();
    const int other = me == pair.first ? pair.second : pair.first;
    auto round_trip = [&]() -> Status {
      auto receive = [&]() -> Status {
        // Reducing: into the other vector, then into the one passed on.
        TFDIST_RETURN_IF_ERROR(
            transport_.Recv(other, reduce ? back() : front(), bytes_, kLinkCostTag));
        if (reduce) Reduce();
        return Status::OK();
      };
      if (me == pair.first) {
        TFDIST_RETURN_IF_ERROR(transport_.Send(other, front(), bytes_, kLinkCostTag));
        return receive();
      }
      TFDIST_RETURN_IF_ERROR(receive());
      return transport_.Send(other, front(), bytes_, kLinkCostTag);
    };
    if (first) TFDIST_RETURN_IF_ERROR(round_trip());  // untimed (Effort)
    const Clock::time_point start = Clock::now();
    for (int step = 0; step < effort.steps; ++step) TFDIST_RETURN_IF_ERROR(round_trip());
    if (me == pair.first) *seconds = Seconds(start) / (2 * effort.steps);
    return Status::OK();
  }

  Transport& transport_;
  const HostLayout& layout_;
  const LinkClass link_;
  const std::vector<int> group_members_;
  SubgroupTransport group_;
  AlignedFloats front_;
  using ScratchWord = std::max_align_t;  // as thread_scratch.cc
  std::vector<ScratchWord> scratch_;
  size_t bytes_ = 0;
  long ring_runs_ = 0;  // the same count on every member of the group
};

}  // namespace

bool HasStepPair(const HostLayout& layout, LinkClass link) {
  return LargestGroup(layout, link) > 1;
}

std::vector<size_t> IntraHostCalibrationSizes() {
  return {8,
          size_t{1} << 10,
          size_t{4} << 10,  // the last size Open MPI's shared memory sends eagerly
          size_t{8} << 10,
          size_t{16} << 10,
          size_t{64} << 10,
          size_t{256} << 10,
          size_t{1} << 20,
          size_t{4} << 20,
          size_t{16} << 20,
          size_t{64} << 20};
}

std::vector<size_t> InterHostCalibrationSizes() {
  return {8, size_t{16} << 10, size_t{256} << 10, size_t{1} << 20};
}

Status MeasureStepCosts(Transport& transport, const HostLayout& layout, LinkClass link,
                        const std::vector<size_t>& sizes, StepCosts* out) {
  if (layout.size() != transport.size()) {
    return Status::InvalidArgument("step calibration: the host layout has " +
                                   std::to_string(layout.size()) + " ranks, the group " +
                                   std::to_string(transport.size()));
  }
  if (!HasStepPair(layout, link)) {
    return Status::InvalidArgument(link == LinkClass::kIntraHost
                                       ? "step calibration: no host has two ranks"
                                       : "step calibration: the ranks are on one host");
  }
  if (sizes.empty() || !std::is_sorted(sizes.begin(), sizes.end())) {
    return Status::InvalidArgument("step calibration: sizes must be ascending");
  }
  for (size_t bytes : sizes) {
    if (bytes == 0 || bytes % sizeof(float) != 0) {
      return Status::InvalidArgument(
          "step calibration: sizes must be positive multiples of 4, not " +
          std::to_string(bytes));
    }
  }
  // Ring steps up to a chunk of the largest size, in a buffer of at most
  // kRingBufferBytes (a ring of P moves m/P per step; past the top the
  // curve goes on at its last pace).
  const size_t ring_top = std::min(sizes.back(), kRingBufferBytes / LargestGroup(layout, link)) /
                          sizeof(float) * sizeof(float);
  std::vector<size_t> ring_sizes;
  for (size_t bytes : sizes) {
    if (bytes < ring_top) ring_sizes.push_back(bytes);
  }
  ring_sizes.push_back(ring_top);
  std::vector<size_t> all_sizes = sizes;
  all_sizes.insert(all_sizes.end(), ring_sizes.begin(), ring_sizes.end());
  std::sort(all_sizes.begin(), all_sizes.end());
  all_sizes.erase(std::unique(all_sizes.begin(), all_sizes.end()), all_sizes.end());
  // Pairs at distances past 1 only up to kFarTopBytes: past it a step's
  // cost hardly depends on which ranks share a core, and a curve there goes
  // on along distance 1's (StepCosts::Seconds).
  auto measures = [&](const Series& series, size_t bytes) {
    const std::vector<size_t>& own = IsRing(series.kind) ? ring_sizes : sizes;
    return std::find(own.begin(), own.end(), bytes) != own.end() &&
           (series.distance_index == 0 || bytes <= kFarTopBytes);
  };

  // times[(series * sizes + size) * kMostTries + try]: this rank's, -1 where
  // not measured; then the slowest rank's, for every rank.
  const std::vector<Series> plan = PlanSeries(layout, link);
  const size_t slots = all_sizes.size() * kMostTries;
  std::vector<double> times(plan.size() * slots, -1.0);
  {
    StepProbe probe(transport, layout, link);
    probe.Allocate(std::max(sizes.back(), ring_top * LargestGroup(layout, link)));
    for (size_t s = 0; s < all_sizes.size(); ++s) {
      const size_t bytes = all_sizes[s];
      const Effort effort = EffortFor(bytes, link);
      probe.Prepare(bytes);
      const Clock::time_point start = Clock::now();
      for (int attempt = 0; attempt < effort.most_tries; ++attempt) {
        // Rank 0 decides whether to try again, for everyone.
        unsigned char again = attempt < effort.fewest_tries ||
                              std::chrono::duration<double>(Clock::now() - start).count() <
                                  effort.budget_s;
        TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, &again, sizeof again, 0));
        if (!again) break;
        for (size_t series = 0; series < plan.size(); ++series) {
          if (!measures(plan[series], bytes)) continue;
          TFDIST_RETURN_IF_ERROR(probe.Time(plan[series], effort, attempt == 0,
                                            &times[series * slots + s * kMostTries + attempt]));
        }
      }
    }
  }
  TFDIST_RETURN_IF_ERROR(TreeAllreduce(transport, times.data(), times.size(),
                                       DataType::kFloat64, ReduceOp::kMax));
  StepCosts costs;
  for (size_t series = 0; series < plan.size(); ++series) {
    std::vector<CostPoint> points;
    for (size_t s = 0; s < all_sizes.size(); ++s) {
      if (!measures(plan[series], all_sizes[s])) continue;
      const double* first = &times[series * slots + s * kMostTries];
      double seconds = *std::max_element(first, first + kMostTries);  // a measured one
      for (int attempt = 0; attempt < kMostTries; ++attempt) {
        if (first[attempt] >= 0) seconds = std::min(seconds, first[attempt]);
      }
      points.push_back({static_cast<double>(all_sizes[s]), seconds});
    }
    // A step never costs more than a larger one of its kind: where every try
    // at one size was slowed (a rank not scheduled in time), the next size
    // up bounds it.
    for (size_t i = points.size(); i-- > 1;) {
      points[i - 1].seconds = std::min(points[i - 1].seconds, points[i].seconds);
    }
    costs.at(plan[series].kind, plan[series].distance_index) = CostCurve(std::move(points));
  }
  *out = std::move(costs);
  return Status::OK();
}

}  // namespace tfdist
