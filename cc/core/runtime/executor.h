// Runs negotiated collectives on this rank's buffers: packs fused tensors,
// stages 16-bit floats in float32, applies scale factors, picks the
// allreduce algorithm and the plan that runs it (allreduce_plan.h) and hands
// the bytes to cc/core/collectives.
#ifndef TFDIST_CORE_RUNTIME_EXECUTOR_H_
#define TFDIST_CORE_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc/core/collectives/ring_pipeline.h"
#include "cc/core/collectives/shared_memory_allreduce.h"
#include "cc/core/tuning/algorithm_chooser.h"
#include "cc/core/tuning/cost_model.h"
#include "cc/core/runtime/algorithm_overrides.h"
#include "cc/core/runtime/allreduce_plan.h"
#include "cc/core/runtime/memory_advice.h"
#include "cc/core/runtime/request.h"
#include "cc/core/runtime/stats.h"
#include "cc/core/runtime/timeline.h"
#include "cc/core/control/control_plane.h"
#include "cc/core/transport/transport.h"
#include "cc/core/transport/counting_transport.h"

namespace tfdist {

// The "mpi" algorithm: MPI_Allreduce itself, as the reference the others are
// measured against (mpi_allreduce.h), from `input` into `output` (in place
// where they are equal). `reduce` is empty where the runtime has no MPI
// underneath (the unit tests): the algorithm then fails the request.
struct ReferenceAllreduce {
  std::function<Status(const void* input, void* output, size_t count, DataType dtype,
                       ReduceOp op)>
      reduce;
  // The types `reduce` takes (not float16 or bfloat16).
  std::function<bool(DataType)> reduces;
  // Whether "auto" times it beside the transport algorithms. A user can
  // force it, so auto that never loses to a fixed choice must try it too:
  // at np 2 and 4 MiB it took 0.87-0.91x the ring's time in two jobs of
  // three. Not over emulated links, which it would bypass.
  bool auto_may_pick = false;
};

// The "shm" algorithm (shared_memory_allreduce.h), where this runtime's
// ranks can share memory.
struct SharedMemoryLink {
  SharedMemoryAllreduce* allreduce = nullptr;  // null: not available, for `unavailable`
  // Why not, for the error a forced "shm" gets; a phrase after "because".
  std::string unavailable = "this runtime has no shared memory segment";
  // Over this rank's host's ranks on a segment of their own, where the job
  // spans hosts (host_shared_memory.h): the "hierarchical_shm" algorithm,
  // hierarchical with its phases within a host on it. Null: not available,
  // for `host_unavailable`.
  SharedMemoryAllreduce* host_allreduce = nullptr;
  std::string host_unavailable = "this runtime has no shared memory segment per host";
};

class CollectiveExecutor {
 public:
  // Below this many bytes "auto" runs MPI_Allreduce where it may pick it
  // (ReferenceAllreduce::auto_may_pick), without trials. Every algorithm is
  // a few messages of a few bytes there, and MPI's own makes them inside
  // one call where ours go through the transport a message at a time. In
  // every 40-round job at np 2-4 (docs/cost_model.md, "Forty rounds") MPI
  // forced was the fastest or within 8% of it from 4 to 256 B, and the
  // trials, which time single calls, kept the tree at np 3 and 4 where a
  // stream of its calls was 7-12% slower than MPI's. From 4 KiB on, the
  // tree and the butterfly beat MPI by 10-25% at np 3 and 4, so the trials
  // decide there. A power of two: a size class lies wholly on one side.
  static constexpr size_t kMpiAllreduceBelowBytes = 1024;
  static_assert((kMpiAllreduceBelowBytes & (kMpiAllreduceBelowBytes - 1)) == 0,
                "a size class must lie wholly on one side");

  // "hierarchical_shm" is a candidate of "auto" from this many of its
  // slots a call up (the per-host segment's, host_shared_memory.h). Which of
  // hierarchical's two forms is faster depends on how MPI moves a message
  // within a host (docs/algorithms.md), which the model does not know, so
  // the trials time both; but a call of one slot or two is not a pipeline,
  // and the trials, which time calls after the ranks agree, saw it faster
  // than it runs in a stream, where each call's fill meets the last one's
  // copying out (2x2 hosts, 1 MiB: 950 us a trial call, 1,745 us a call in
  // a block; "hierarchical" 1,156 and 1,399): the trials kept it where it
  // lost by 1.3x in two jobs of three. From four slots a call meets that
  // contention between its own chunks, and its trials picked right in every
  // job (docs/results/auto-vs-forced-hshm-2x2-10g*.md). With 1 MiB slots
  // that is 4 MiB, a size class's lower end, so a class lies wholly on one
  // side.
  static constexpr size_t kHierarchicalSharedMemoryTimedFromSlots = 4;

  // Collectives move their data over `transport` (the process's transport,
  // or an emulated-link wrapper of it); barriers go through `control_plane`.
  // Both must outlive the executor. `hosts` and `network` are what "auto"
  // and the hierarchical allreduce decide by; `auto_trials` how many timed
  // calls of each of its candidates "auto" makes per size class before
  // it keeps one (algorithm_chooser.h; 0: the model's pick, untimed).
  // `shared_memory`: the "shm" algorithm, which "auto" times beside the
  // others where it is available.
  CollectiveExecutor(Transport& transport, ControlPlane& control_plane,
                     ReferenceAllreduce reference_allreduce, const HostLayout& hosts,
                     const NetworkCost& network, AllreduceAlgorithm default_algorithm,
                     int auto_trials, bool debug_log, Stats& stats, Timeline& timeline,
                     SharedMemoryLink shared_memory = {})
      : transport_(transport),
        control_plane_(control_plane),
        reference_allreduce_(std::move(reference_allreduce)),
        shared_memory_(std::move(shared_memory)),
        wire_(transport, stats.bytes_sent),
        hosts_(hosts),
        network_(network),
        default_algorithm_(default_algorithm),
        chooser_(
            [this](size_t bytes) {
              AlgorithmChooser::Candidates candidates =
                  AlgorithmChooser::Plausible(RankAllreduce(hosts_, bytes, network_));
              // Where the model offers nothing to compare (one rank), it
              // would be the only candidate.
              if (reference_allreduce_.reduce && reference_allreduce_.auto_may_pick &&
                  !candidates.empty()) {
                if (bytes < kMpiAllreduceBelowBytes) {
                  return AlgorithmChooser::Candidates{AllreduceAlgorithm::kMpi};
                }
                candidates.push_back(AllreduceAlgorithm::kMpi);
              }
              if (shared_memory_.allreduce != nullptr && !candidates.empty()) {
                candidates.push_back(AllreduceAlgorithm::kSharedMemory);
              }
              if (shared_memory_.host_allreduce != nullptr && !candidates.empty() &&
                  bytes >= kHierarchicalSharedMemoryTimedFromSlots *
                               shared_memory_.host_allreduce->slot_bytes()) {
                candidates.push_back(AllreduceAlgorithm::kHierarchicalSharedMemory);
              }
              return candidates;
            },
            transport.size() > 1 ? auto_trials : 0),
        debug_log_(debug_log),
        stats_(stats),
        timeline_(timeline),
        allreduce_plans_(AllreducePlans()) {}
  // The plans hold the executor they run on.
  CollectiveExecutor(const CollectiveExecutor&) = delete;
  CollectiveExecutor& operator=(const CollectiveExecutor&) = delete;

  // The algorithm an allreduce of `bytes`, reduced in `reduced_in`, runs
  // with when it asks for `requested`: the request's, else the default
  // algorithm, else the autotuner's override for its size class, else the
  // chooser's pick (the cost model's, checked against the other plausible
  // algorithms and MPI_Allreduce), short of "mpi" where MPI cannot reduce
  // the type.
  AllreduceAlgorithm Resolve(AllreduceAlgorithm requested, size_t bytes,
                             DataType reduced_in) const;
  // The autotuner's override for `bytes`' size class; kAuto where none.
  AllreduceAlgorithm OverrideFor(size_t bytes) const;
  // Replaces the per-size overrides (algorithm_overrides.h). Every rank must
  // make the same change between the same two rounds (the autotuner's
  // broadcast does); safe against concurrent Resolve calls.
  void SetAlgorithmOverrides(const AlgorithmOverrides& overrides) {
    overrides_.store(overrides.packed(), std::memory_order_relaxed);
  }

  // All requests in `group` are allreduces that fusion.h allowed to share;
  // the first of AllreducePlans() that applies runs them.
  Status Allreduce(const std::vector<Request*>& group);
  Status Allgather(Request& request, const std::vector<TensorDescription>& per_rank);
  Status Broadcast(Request& request);
  Status Alltoall(Request& request, const std::vector<TensorDescription>& per_rank);
  Status Reducescatter(Request& request);
  // Members of grouped ops that fusion.h let share one collective
  // (grouped_executor.cc); per_rank[i] is members[i]'s per-rank descriptions.
  Status GroupedAllgather(const std::vector<Request*>& members,
                          const std::vector<const std::vector<TensorDescription>*>& per_rank);
  Status GroupedReducescatter(const std::vector<Request*>& members);
  Status Barrier();
  // Writes join()'s result, the rank that joined last, into the output.
  Status Join(Request& request, int last_joined);

 private:
  // The allreduce plans (executor.cc), one per path below.
  class ExecutorPlan;
  class AdasumPlan;
  class WhereTheyLiePlan;
  class RingCompressedPlan;
  class LargeApartPlan;
  class FusedPlan;
  // The plans in the order they are asked.
  std::vector<std::unique_ptr<AllreducePlan>> AllreducePlans();

  // One collective, the ring or "shm", over the tensors where they lie (a
  // tensor alone, or those of a group over kLargestFusedTensorBytes,
  // fusion.h) and the fusion buffer holding the group's small ones; `bytes`
  // is the group's total.
  Status WhereTheyLie(const std::vector<Request*>& group, AllreduceAlgorithm algorithm,
                      size_t bytes);
  // One tensor alone, compressed to 16 bits (request.h WireCompression), on
  // the ring: rounded and widened segment by segment inside the ring, with
  // the fusion buffer as the wire copy (RingAllreduceCompressed).
  Status RingCompressed(Request& request, AllreduceAlgorithm algorithm, size_t bytes);
  // A group with large members run by another algorithm: the small members
  // fused, then each large one as an allreduce of its own.
  Status AllreduceLargeApart(const std::vector<Request*>& group);
  // Packed into the fusion buffer, or one tensor alone in its output, with
  // any algorithm.
  Status AllreduceFused(const std::vector<Request*>& group);
  // Allreduces combined by Adasum, packed into the fusion buffer, each
  // tensor combined on its own (adasum_executor.cc).
  Status AllreduceAdasum(const std::vector<Request*>& group);
  // Runs `plan` on `group`; where the group's algorithm is a trial of
  // "auto" (chooser_), times it, agrees the time across the ranks and
  // reports it.
  Status RunPlan(AllreducePlan& plan, const AllreduceGroup& group, bool is_auto);
  // Allreduces `count` elements of `input` into `output` with `algorithm`
  // (not auto). `input == output` is in place; out of place, every
  // algorithm reads the input where it lies (allreduce.h; MPI_Allreduce's
  // send buffer for "mpi"). The transport algorithms multiply the result by
  // `result_scale` as they complete it; "mpi" takes no scale.
  Status Reduce(const void* input, void* output, size_t count, DataType dtype, ReduceOp op,
                AllreduceAlgorithm algorithm, double result_scale);
  // `count` elements of the request's input, scaled (PackScale), in the
  // wire type; the reduction's identity for a stand-in (join_state.h).
  void CopyIn(const Request& request, void* destination, DataType accumulation,
              size_t count);
  // What a reduction of `bytes` on a segment that `sharing` ranks share
  // counts as sent.
  void CountSharedMemoryBytes(size_t bytes, int sharing);
  // The segment's allreduce that runs `algorithm` ("shm", or
  // "hierarchical_shm": the host's segment across hosts, the flat one on
  // one host); null where this job has none or `algorithm` is another. It
  // is shared_memory_.host_allreduce exactly where the phase across hosts
  // must run too.
  SharedMemoryAllreduce* SharedMemoryFor(AllreduceAlgorithm algorithm) const;
  // Reduces `spans` (`bytes` in all) on `segment`, one of SharedMemoryFor's:
  // with the phase across hosts where it is the host's segment, else flat.
  Status AllreduceOnSegment(SharedMemoryAllreduce& segment, const std::vector<RingSpan>& spans,
                            size_t bytes, DataType dtype, ReduceOp op, double result_scale);
  // Counts what a compressed collective that sent the wire bytes since
  // `sent_before` saved against sending full-width elements.
  void CountSaved(uint64_t sent_before, const TensorDescription& d);
  void CountAllreduce(const std::string& label, size_t tensors, size_t bytes,
                      AllreduceAlgorithm algorithm);
  void Log(const char* what, const std::string& name, size_t tensors,
           size_t bytes, const char* detail) const;

  Transport& transport_;
  ControlPlane& control_plane_;
  ReferenceAllreduce reference_allreduce_;
  SharedMemoryLink shared_memory_;
  CountingTransport wire_;  // what the algorithms send through
  HostLayout hosts_;
  NetworkCost network_;
  AllreduceAlgorithm default_algorithm_;
  std::atomic<uint64_t> overrides_{0};  // AlgorithmOverrides, packed
  AlgorithmChooser chooser_;  // what "auto" resolves to where no override says
  bool debug_log_;
  bool timing_a_trial_ = false;  // RunPlan is inside a trial's timed call
  Stats& stats_;
  Timeline& timeline_;
  std::vector<uint8_t> fusion_buffer_;
  HugePageCollapser huge_pages_;  // for tensors reduced where they lie
  // Last: the plans call back into the members above.
  std::vector<std::unique_ptr<AllreducePlan>> allreduce_plans_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_EXECUTOR_H_
