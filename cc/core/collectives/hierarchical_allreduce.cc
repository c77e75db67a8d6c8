// Hierarchical (two-level) allreduce, for ranks spread over H hosts of k
// ranks each, where links between hosts are slower than within one.
//
// The buffer is cut into S segments (S from the planner: the cost model's
// HierarchicalSegments); each goes through three phases:
//  RS. Reduce-scatter within each host (a ring, ring_pipeline.h): local rank
//      l ends with shard l of the segment (chunk l of k, chunk_layout.h)
//      reduced over its host.
//  X.  Cross-host allreduce of that shard among the H ranks with local rank
//      l, one per host, with the flat algorithm the planner picks for a
//      shard of that size on the inter-host link. The k cross groups run at
//      once, each rank on its own NIC.
//  AG. Allgather within each host (ring, allgather.h): every rank gets all k
//      reduced shards of the segment.
// The calling thread runs RS and AG, the caller's side thread
// (side_thread.h) runs X, so that X of segment i overlaps RS of segment i+1
// and AG of segment i-1:
//     caller: RS0 RS1 AG0 RS2 AG1 ... RS(S-1) AG(S-2) AG(S-1)
//     side:       X0      X1      ...         X(S-1)
// The two threads talk to disjoint sets of peers (the host's other ranks;
// the same local rank on other hosts), so their messages never meet, and
// each thread keeps its own order on every pair. Overlapping needs a
// transport that two threads may use at once (MPI_THREAD_MULTIPLE); without
// one the phases run one after another, on the whole buffer.
//
// Out of place, RS reads the input where it lies (its first step sends from
// it, each reduce step copies a segment of it into the output just before
// reducing into it), so nobody copies the input to the output first.
// Each shard is reduced along one path and then copied, so every rank ends
// with the same bits. Each rank sends about 2(H-1)/H * m/k bytes across
// hosts (m/k with butterfly), instead of the flat ring's 2m(P-1)/P in steps
// bounded by the slow links.
//
// Time (tuning/cost_model.cc), per segment of m/S bytes, with the step curves of
// step_costs.h:
//   a = (k-1) * ring_intra(m/Sk)                                     RS
//   x = min over flat algorithms of T(H ranks, m/Sk, across hosts)   X
//   x_host = that algorithm's T on the host's own curves
//   b = (k-1) * ring_intra(m/Sk)                                     AG
//   T_hier = a + x + b + (S-1) * max(a + b + x_host, x) + S * handoff
#include "cc/core/collectives/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "cc/core/collectives/allgather.h"
#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/ring_pipeline.h"
#include "cc/core/collectives/side_thread.h"
#include "cc/core/transport/subgroup_transport.h"

namespace tfdist {
namespace {

// One rank's view of the run: where segment s lies, its shards, and the
// three phases on it.
class HierarchicalRun {
 public:
  HierarchicalRun(Transport& transport, const HostLayout& layout,
                  const HierarchicalPlanner& planner,
                  const void* input, void* output, size_t count, DataType dtype, ReduceOp op,
                  int segments)
      : layout_(layout),
        per_host_(layout.ranks_per_host()),
        local_rank_(layout.local_rank(transport.rank())),
        element_size_(DataTypeSize(dtype)),
        input_(static_cast<const unsigned char*>(input)),
        output_(static_cast<unsigned char*>(output)),
        count_(count),
        dtype_(dtype),
        op_(op),
        segments_(segments),
        host_(transport, layout.ranks_of_host(layout.host_of(transport.rank()))),
        cross_(transport, layout.CrossGroup(local_rank_)),
        // Chosen once per call, for the first segment's shard: the segments'
        // shards differ by at most an element, and the choice depends only on
        // the shard's size, which every rank of a cross group shares (the
        // same local rank), so they all run the same algorithm. Pricing the
        // algorithms is microseconds of CPU per rank, on the critical path
        // of a latency-bound allreduce where ranks share cores.
        cross_algorithm_(layout.host_count() > 1
                             ? planner.CrossAlgorithm(layout.host_count(),
                                                      ShardBytes(0, local_rank_))
                             : AllreduceAlgorithm::kButterfly) {}

  int segments() const { return segments_; }
  bool in_place() const { return input_ == output_; }

  // Within the host: shard l of segment s reduced over the host, in the output.
  Status ReduceScatter(int s) {
    const size_t begin = SegmentBegin(s) * element_size_;
    const size_t bytes = SegmentBytes(s);
    if (bytes == 0) return Status::OK();
    if (per_host_ == 1) {
      if (!in_place()) std::memcpy(output_ + begin, input_ + begin, bytes);
      return Status::OK();
    }
    RingSchedule schedule;
    schedule.element_size = element_size_;
    schedule.chunk_offsets.resize(per_host_ + 1, 0);
    for (int shard = 0; shard < per_host_; ++shard) {
      schedule.chunk_offsets[shard + 1] = ShardBegin(s, shard + 1) - SegmentBegin(s) * element_size_;
    }
    schedule.shift = -1;
    schedule.reduce_steps = per_host_ - 1;
    schedule.dtype = dtype_;
    schedule.op = op_;
    schedule.tag = kReducescatterTag;
    const RingSpan span{bytes, output_ + begin, in_place() ? nullptr : input_ + begin};
    return RunRingSchedule(host_, {span}, schedule);
  }

  // Across hosts: this rank's shard of segment s reduced over all hosts.
  Status CrossAllreduce(int s) {
    if (layout_.host_count() == 1) return Status::OK();
    const size_t bytes = ShardBytes(s, local_rank_);
    return RunAllreduce(cross_algorithm_, cross_, output_ + ShardBegin(s, local_rank_),
                        bytes / element_size_, dtype_, op_);
  }

  // Within the host: every shard of segment s from the rank that holds it.
  Status Allgather(int s) {
    if (per_host_ == 1 || SegmentBytes(s) == 0) return Status::OK();
    std::vector<size_t> shard_bytes(per_host_);
    for (int shard = 0; shard < per_host_; ++shard) shard_bytes[shard] = ShardBytes(s, shard);
    return RingAllgatherv(host_, output_ + ShardBegin(s, local_rank_),
                          shard_bytes[local_rank_], output_ + SegmentBegin(s) * element_size_,
                          shard_bytes);
  }

 private:
  // First element of segment s (s == segments_ gives count_).
  size_t SegmentBegin(int s) const { return ChunkBegin(count_, segments_, s); }
  size_t SegmentBytes(int s) const {
    return (SegmentBegin(s + 1) - SegmentBegin(s)) * element_size_;
  }
  // Byte offset in the buffer of shard `shard` of segment s.
  size_t ShardBegin(int s, int shard) const {
    const size_t segment_count = SegmentBegin(s + 1) - SegmentBegin(s);
    return (SegmentBegin(s) + ChunkBegin(segment_count, per_host_, shard)) * element_size_;
  }
  size_t ShardBytes(int s, int shard) const {
    return ShardBegin(s, shard + 1) - ShardBegin(s, shard);
  }

  const HostLayout& layout_;
  const int per_host_;
  const int local_rank_;
  const size_t element_size_;
  const unsigned char* const input_;
  unsigned char* const output_;
  const size_t count_;
  const DataType dtype_;
  const ReduceOp op_;
  const int segments_;
  SubgroupTransport host_;
  SubgroupTransport cross_;
  // The cost model's choice for one rank per host, every step between hosts.
  const AllreduceAlgorithm cross_algorithm_;
};

// The phases of every segment one after another, on this thread.
Status RunInOrder(HierarchicalRun& run) {
  for (int s = 0; s < run.segments(); ++s) {
    TFDIST_RETURN_IF_ERROR(run.ReduceScatter(s));
    TFDIST_RETURN_IF_ERROR(run.CrossAllreduce(s));
    TFDIST_RETURN_IF_ERROR(run.Allgather(s));
  }
  return Status::OK();
}

// RS and AG here, X on the side thread, in the order the file comment shows.
Status RunPipelined(HierarchicalRun& run) {
  const int segments = run.segments();
  SideThread& side = CallersSideThread();
  std::vector<std::future<Status>> crossed(segments);
  Status result;
  for (int s = 0; s < segments && result.ok(); ++s) {
    result = run.ReduceScatter(s);
    if (!result.ok()) break;
    crossed[s] = side.Submit([&run, s] { return run.CrossAllreduce(s); });
    if (s > 0) {
      result = crossed[s - 1].get();
      if (result.ok()) result = run.Allgather(s - 1);
    }
  }
  if (result.ok()) {
    result = crossed[segments - 1].get();
    if (result.ok()) result = run.Allgather(segments - 1);
  }
  // Even after a failure, no task may outlive the buffers it works on.
  for (std::future<Status>& pending : crossed) {
    if (!pending.valid()) continue;
    const Status status = pending.get();
    if (result.ok()) result = status;
  }
  return result;
}

// What both forms check before they run: `layout` fits `transport` and is
// uniform.
Status CheckLayout(const Transport& transport, const HostLayout& layout) {
  if (layout.size() != transport.size()) {
    return Status::InvalidArgument("hierarchical allreduce: the host layout has " +
                                   std::to_string(layout.size()) + " ranks, the group " +
                                   std::to_string(transport.size()));
  }
  if (!layout.uniform()) {
    return Status::InvalidArgument(
        "hierarchical allreduce needs the same number of ranks on every host; "
        "use a flat algorithm (or TFDIST_VIRTUAL_HOSTS) for this job");
  }
  return Status::OK();
}

}  // namespace

Status HierarchicalAllreduceSpansOverSharedMemory(SharedMemoryAllreduce& host_memory,
                                                  Transport& transport, const HostLayout& layout,
                                                  const HierarchicalPlanner& planner,
                                                  const std::vector<RingSpan>& spans,
                                                  DataType dtype, ReduceOp op,
                                                  double result_scale, int segments) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  TFDIST_RETURN_IF_ERROR(CheckLayout(transport, layout));
  const int local_rank = layout.local_rank(transport.rank());
  if (layout.host_count() < 2 || host_memory.size() != layout.ranks_per_host() ||
      host_memory.rank() != local_rank) {
    return Status::InvalidArgument(
        "hierarchical allreduce over shared memory: the segment's group (rank " +
        std::to_string(host_memory.rank()) + " of " + std::to_string(host_memory.size()) +
        ") is not this rank's host (local rank " + std::to_string(local_rank) + " of " +
        std::to_string(layout.ranks_per_host()) + ", " + std::to_string(layout.host_count()) +
        " hosts)");
  }
  const size_t element = DataTypeSize(dtype);
  size_t bytes = 0;
  for (const RingSpan& span : spans) bytes += span.bytes;
  const size_t count = bytes / element;
  if (count == 0) return Status::OK();
  if (segments <= 0) segments = planner.Segments(layout, bytes);
  segments = static_cast<int>(std::min<size_t>(static_cast<size_t>(segments), count));
  // Every rank of every host cuts the same chunks, so a cross group's ranks
  // hold parts of the same size; the algorithm is chosen for the first
  // chunk's part, as the message form chooses for its first shard.
  const size_t chunk_count =
      std::min((count + segments - 1) / segments, host_memory.slot_bytes() / element);
  const size_t part_count = ChunkBegin(chunk_count, layout.ranks_per_host(), local_rank + 1) -
                            ChunkBegin(chunk_count, layout.ranks_per_host(), local_rank);
  const AllreduceAlgorithm cross_algorithm =
      planner.CrossAlgorithm(layout.host_count(), part_count * element);
  SubgroupTransport cross(transport, layout.CrossGroup(local_rank));
  return host_memory.AllreduceSpansAcrossHosts(
      spans, dtype, op, result_scale, chunk_count * element,
      [&](void* part, size_t n) { return RunAllreduce(cross_algorithm, cross, part, n, dtype, op); });
}

Status HierarchicalAllreduceOverSharedMemory(SharedMemoryAllreduce& host_memory,
                                             Transport& transport, const HostLayout& layout,
                                             const HierarchicalPlanner& planner,
                                             const void* input, void* output, size_t count,
                                             DataType dtype, ReduceOp op, double result_scale,
                                             int segments) {
  const RingSpan span{count * DataTypeSize(dtype), static_cast<unsigned char*>(output),
                      input == output ? nullptr : static_cast<const unsigned char*>(input)};
  return HierarchicalAllreduceSpansOverSharedMemory(host_memory, transport, layout, planner,
                                                    {span}, dtype, op, result_scale, segments);
}

Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                             const HierarchicalPlanner& planner, const void* input,
                             void* output, size_t count, DataType dtype, ReduceOp op,
                             int segments) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  TFDIST_RETURN_IF_ERROR(CheckLayout(transport, layout));
  if (count == 0) return Status::OK();
  if (transport.size() == 1) {
    if (input != output) std::memcpy(output, input, count * DataTypeSize(dtype));
    return Status::OK();
  }
  // Overlap needs both levels and a transport two threads may use at once.
  const bool pipelined = layout.host_count() > 1 && layout.ranks_per_host() > 1 &&
                         transport.AllowsConcurrentCalls();
  if (segments <= 0) {
    segments = pipelined ? planner.Segments(layout, count * DataTypeSize(dtype)) : 1;
  }
  segments = static_cast<int>(std::min<size_t>(static_cast<size_t>(segments), count));
  HierarchicalRun run(transport, layout, planner, input, output, count, dtype, op, segments);
  return pipelined && segments > 1 ? RunPipelined(run) : RunInOrder(run);
}

}  // namespace tfdist
