#include "cc/core/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>

#include "cc/core/collectives/allgather.h"
#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/alltoall.h"
#include "cc/core/collectives/broadcast.h"
#include "cc/core/collectives/hierarchical_allreduce.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/collectives/reducescatter.h"
#include "cc/core/collectives/ring_allreduce.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/runtime/fusion.h"
#include "cc/core/runtime/memory_advice.h"
#include "cc/core/tuning/hierarchical_planner.h"

namespace tfdist {

namespace {

size_t RowBytes(const TensorDescription& d) {
  return static_cast<size_t>(d.row_elements()) * DataTypeSize(d.dtype);
}

std::vector<int64_t> WithFirstDimension(const TensorDescription& d, int64_t rows) {
  std::vector<int64_t> shape = d.shape;
  shape[0] = rows;
  return shape;
}

}  // namespace

AllreduceAlgorithm CollectiveExecutor::OverrideFor(size_t bytes) const {
  return AlgorithmOverrides::FromPacked(overrides_.load(std::memory_order_relaxed)).For(bytes);
}

AllreduceAlgorithm CollectiveExecutor::Resolve(AllreduceAlgorithm requested, size_t bytes,
                                               DataType reduced_in) const {
  AllreduceAlgorithm algorithm =
      requested == AllreduceAlgorithm::kAuto ? default_algorithm_ : requested;
  // The autotuner's per-size override first (the same on every rank from the
  // same round), then the chooser's pick.
  if (algorithm == AllreduceAlgorithm::kAuto) algorithm = OverrideFor(bytes);
  if (algorithm != AllreduceAlgorithm::kAuto) return algorithm;
  const bool mpi_reduces = reference_allreduce_.reduces && reference_allreduce_.reduces(reduced_in);
  return mpi_reduces ? chooser_.Pick(bytes)
                     : chooser_.PickOtherThan(bytes, AllreduceAlgorithm::kMpi);
}

namespace {

// A forced algorithm this job's links lack; `why` is a phrase after "because".
Status CannotRun(const char* algorithm, const std::string& why) {
  return Status::FailedPrecondition(std::string("the '") + algorithm +
                                    "' allreduce algorithm cannot run in this job, because " +
                                    why);
}

}  // namespace

Status CollectiveExecutor::Reduce(const void* input, void* output, size_t count,
                                  DataType dtype, ReduceOp op, AllreduceAlgorithm algorithm,
                                  double result_scale) {
  if (algorithm == AllreduceAlgorithm::kMpi) {
    if (result_scale != 1.0) {
      return Status::Internal("tfdist: the 'mpi' algorithm runs unscaled only");
    }
    if (!reference_allreduce_.reduce) {
      return CannotRun("mpi", "this runtime has no MPI underneath");
    }
    // MPI's own algorithm sends past the counting transport: count what a
    // ring would send, 2(P-1)/P of the buffer, as an estimate.
    const uint64_t p = static_cast<uint64_t>(transport_.size());
    stats_.bytes_sent += 2 * (p - 1) * count * DataTypeSize(dtype) / p;
    return reference_allreduce_.reduce(input, output, count, dtype, op);
  }
  if (algorithm == AllreduceAlgorithm::kSharedMemory ||
      algorithm == AllreduceAlgorithm::kHierarchicalSharedMemory) {
    SharedMemoryAllreduce* shared = SharedMemoryFor(algorithm);
    if (shared == nullptr) {
      const bool flat = algorithm == AllreduceAlgorithm::kSharedMemory || hosts_.host_count() == 1;
      return CannotRun(AllreduceAlgorithmName(algorithm),
                       flat ? shared_memory_.unavailable : shared_memory_.host_unavailable);
    }
    const RingSpan span{count * DataTypeSize(dtype), static_cast<unsigned char*>(output),
                        input == output ? nullptr : static_cast<const unsigned char*>(input)};
    return AllreduceOnSegment(*shared, {span}, span.bytes, dtype, op, result_scale);
  }
  return RunAllreduce(algorithm, wire_, hosts_, CostModelPlanner(network_), input, output, count,
                      dtype, op, result_scale);
}

namespace {

// Large members of a fused group are reduced where they lie (fusion.h); a
// decision on the description alone, so every rank makes the same one.
bool ReducedWhereItLies(const Request& request) {
  return AccumulationBytes(request.description) > kLargestFusedTensorBytes;
}

// A compressed allreduce applies a postscale that shrinks values (Average's
// 1/P) while packing, before the rounding to 16 bits: then no sum of inputs
// that float16 holds can overflow on the wire, whatever P. A growing
// postscale stays at the unpack, where it cannot overflow the wire either.
bool ScalesWhilePacking(const TensorDescription& d) {
  return d.compression != WireCompression::kNone && std::fabs(d.postscale) <= 1.0;
}

double PackScale(const TensorDescription& d) {
  return ScalesWhilePacking(d) ? d.prescale * d.postscale : d.prescale;
}

double UnpackScale(const TensorDescription& d) {
  return ScalesWhilePacking(d) ? 1.0 : d.postscale;
}

}  // namespace

// What every plan holds: the executor whose paths it runs.
class CollectiveExecutor::ExecutorPlan : public AllreducePlan {
 public:
  explicit ExecutorPlan(CollectiveExecutor& executor) : executor_(executor) {}

 protected:
  CollectiveExecutor& executor_;
};

// Adasum is its own algorithm and goes first, whatever the description's
// `algorithm` resolves to (adasum_executor.cc).
class CollectiveExecutor::AdasumPlan final : public ExecutorPlan {
 public:
  using ExecutorPlan::ExecutorPlan;
  bool Applies(const AllreduceGroup& group) const override {
    return group.description.combiner == Combiner::kAdasum;
  }
  Status Run(const AllreduceGroup& group) override {
    return executor_.AllreduceAdasum(group.requests);
  }
};

// The ring and the shared-memory allreduces ("shm", "hierarchical_shm") read
// each input where it lies,
// write each result straight into its output and apply the postscale as they
// go: no pass over memory of their own, which for large tensors is most of
// what the executor costs, and a group with large members runs as one
// collective. They need the tensors reduced in their own type and no
// prescale. A tensor alone runs so whatever its size; in a group, the large
// members do, with the small ones packed beside them.
class CollectiveExecutor::WhereTheyLiePlan final : public ExecutorPlan {
 public:
  using ExecutorPlan::ExecutorPlan;
  bool Applies(const AllreduceGroup& group) const override {
    const TensorDescription& d = group.description;
    const bool spans = group.algorithm == AllreduceAlgorithm::kRing ||
                       executor_.SharedMemoryFor(group.algorithm) != nullptr;
    return spans && WireType(d) == d.dtype && d.prescale == 1.0 && !ScalesWhilePacking(d) &&
           (group.has_large || group.requests.size() == 1);
  }
  Status Run(const AllreduceGroup& group) override {
    return executor_.WhereTheyLie(group.requests, group.algorithm, group.bytes);
  }
};

// A tensor alone, compressed to 16 bits (request.h WireCompression), on the
// ring: rounded and widened segment by segment inside the ring rather than in
// passes of their own. A stand-in has no input to read; it goes through the
// fusion buffer (FusedPlan).
class CollectiveExecutor::RingCompressedPlan final : public ExecutorPlan {
 public:
  using ExecutorPlan::ExecutorPlan;
  bool Applies(const AllreduceGroup& group) const override {
    const TensorDescription& d = group.description;
    return group.algorithm == AllreduceAlgorithm::kRing && group.requests.size() == 1 &&
           !group.requests[0]->stand_in && WireType(d) != AccumulationType(d.dtype);
  }
  Status Run(const AllreduceGroup& group) override {
    return executor_.RingCompressed(*group.requests[0], group.algorithm, group.bytes);
  }
};

// Another algorithm for a group with large members: packing those would cost
// more than it saves (fusion.h), so they run on their own.
class CollectiveExecutor::LargeApartPlan final : public ExecutorPlan {
 public:
  using ExecutorPlan::ExecutorPlan;
  bool Applies(const AllreduceGroup& group) const override {
    return group.has_large && group.requests.size() > 1;
  }
  Status Run(const AllreduceGroup& group) override {
    return executor_.AllreduceLargeApart(group.requests);
  }
};

// Anything else: packed into the fusion buffer, or one tensor alone in its
// output, with any algorithm. Applies to every group, so it comes last.
class CollectiveExecutor::FusedPlan final : public ExecutorPlan {
 public:
  using ExecutorPlan::ExecutorPlan;
  bool Applies(const AllreduceGroup&) const override { return true; }
  Status Run(const AllreduceGroup& group) override {
    return executor_.AllreduceFused(group.requests);
  }
};

std::vector<std::unique_ptr<AllreducePlan>> CollectiveExecutor::AllreducePlans() {
  std::vector<std::unique_ptr<AllreducePlan>> plans;
  plans.push_back(std::make_unique<AdasumPlan>(*this));
  plans.push_back(std::make_unique<WhereTheyLiePlan>(*this));
  plans.push_back(std::make_unique<RingCompressedPlan>(*this));
  plans.push_back(std::make_unique<LargeApartPlan>(*this));
  plans.push_back(std::make_unique<FusedPlan>(*this));
  return plans;
}

Status CollectiveExecutor::Allreduce(const std::vector<Request*>& requests) {
  const TensorDescription& d = requests[0]->description;
  size_t bytes = 0;
  bool has_large = false;
  for (const Request* r : requests) {
    bytes += AccumulationBytes(r->description);
    has_large = has_large || ReducedWhereItLies(*r);
  }
  const AllreduceGroup group{requests, d, bytes, has_large,
                             Resolve(d.algorithm, bytes, WireType(d))};
  const bool is_auto = d.algorithm == AllreduceAlgorithm::kAuto &&
                       default_algorithm_ == AllreduceAlgorithm::kAuto;
  for (const std::unique_ptr<AllreducePlan>& plan : allreduce_plans_) {
    if (plan->Applies(group)) return RunPlan(*plan, group, is_auto);
  }
  return Status::Internal("tfdist: no allreduce plan applies to '" + requests[0]->name + "'");
}

Status CollectiveExecutor::RunPlan(AllreducePlan& plan, const AllreduceGroup& group,
                                   bool is_auto) {
  // A trial is a call run with the algorithm picked for its size: not
  // Adasum (its own algorithm), nor a size the autotuner has overridden (it
  // chose from its own trials). A group with large members is timed however
  // its algorithm runs it: whole where the ring or "shm" take it, and with
  // the large members apart where another does, since going apart is then
  // what the class keeps (untimed, a class whose trials reached an apart
  // candidate never moved on). The members' own calls inside a timed group
  // are not trials: their time-agreeing exchanges would be timed as part of
  // the group's, and one of the group's own class would move the class on
  // twice per call.
  const bool trial = is_auto && !timing_a_trial_ &&
                     dynamic_cast<const AdasumPlan*>(&plan) == nullptr &&
                     OverrideFor(group.bytes) == AllreduceAlgorithm::kAuto &&
                     chooser_.IsTrial(group.bytes, group.algorithm);
  if (!trial) return plan.Run(group);
  const auto start = std::chrono::steady_clock::now();
  timing_a_trial_ = true;
  const Status ran = plan.Run(group);
  timing_a_trial_ = false;
  TFDIST_RETURN_IF_ERROR(ran);
  const double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The slowest rank's time, so that every rank reports the same number and
  // makes the same choice.
  std::vector<uint8_t> bytes(sizeof(double));
  std::memcpy(bytes.data(), &mine, sizeof(double));
  std::vector<std::vector<uint8_t>> per_rank;
  TFDIST_RETURN_IF_ERROR(control_plane_.Allgatherv(bytes, WaitKind::kTransfer, &per_rank));
  double slowest = 0.0;
  for (const std::vector<uint8_t>& theirs : per_rank) {
    double seconds = 0.0;
    if (theirs.size() == sizeof(double)) std::memcpy(&seconds, theirs.data(), sizeof(double));
    slowest = std::max(slowest, seconds);
  }
  chooser_.Report(group.bytes, group.algorithm, slowest);
  if (debug_log_ && chooser_.Decided(group.bytes)) {
    std::string typical;
    for (const auto& [algorithm, seconds] : chooser_.TrialSeconds(group.bytes)) {
      typical += std::string(" ") + AllreduceAlgorithmName(algorithm) + " " +
                 std::to_string(seconds * 1e6) + " us;";
    }
    std::fprintf(stderr, "tfdist[%d] auto: %zu bytes (size class 2^%d) keeps %s (typical trial"
                 " calls:%s)\n", transport_.rank(), group.bytes,
                 AlgorithmChooser::SizeClass(group.bytes),
                 AllreduceAlgorithmName(chooser_.Pick(group.bytes)), typical.c_str());
  }
  return Status::OK();
}

Status CollectiveExecutor::AllreduceLargeApart(const std::vector<Request*>& group) {
  std::vector<Request*> small;
  std::vector<Request*> alone;
  for (Request* r : group) (ReducedWhereItLies(*r) ? alone : small).push_back(r);
  Status status = small.empty() ? Status::OK() : AllreduceFused(small);
  for (Request* r : alone) {
    if (!status.ok()) break;
    status = Allreduce({r});
  }
  return status;
}

Status CollectiveExecutor::WhereTheyLie(const std::vector<Request*>& group,
                                        AllreduceAlgorithm algorithm, size_t bytes) {
  const TensorDescription& d = group[0]->description;
  const size_t element = DataTypeSize(d.dtype);
  // A tensor alone lies where it is, whatever its size; in a group, the
  // small ones are packed (fusion.h).
  auto where_it_lies = [&](const Request& r) {
    return group.size() == 1 || ReducedWhereItLies(r);
  };
  // The fusion buffer holds the packed members, then the identity for any
  // member that lies elsewhere and that this rank stands in for (it has no
  // memory of its own).
  size_t packed_count = 0;
  size_t packed_bytes = 0;
  size_t scratch_bytes = 0;
  for (const Request* r : group) {
    if (!where_it_lies(*r)) {
      ++packed_count;
      packed_bytes += AccumulationBytes(r->description);
    } else if (r->stand_in) {
      scratch_bytes += AccumulationBytes(r->description);
    }
  }
  if (fusion_buffer_.size() < packed_bytes + scratch_bytes) {
    fusion_buffer_.resize(packed_bytes + scratch_bytes);
  }
  unsigned char* packed = fusion_buffer_.data();
  unsigned char* scratch = packed + packed_bytes;
  const std::string& label = group[0]->name;

  std::vector<RingSpan> spans;
  if (packed_bytes > 0) spans.push_back({packed_bytes, packed, nullptr});
  size_t offset = 0;
  {
    // The packing is a phase of its own only when there is any; the setup of
    // the ring's spans around it counts as part of it.
    std::optional<TimelineSpan> copy_in;
    if (packed_bytes > 0) {
      copy_in.emplace(timeline_, label, "FUSION_COPY_IN", packed_count, packed_bytes);
    }
    for (const Request* r : group) {
      const size_t member_bytes = AccumulationBytes(r->description);
      if (!where_it_lies(*r)) {
        CopyIn(*r, packed + offset, d.dtype, member_bytes / element);
        offset += member_bytes;
      } else if (r->stand_in) {
        CopyIn(*r, scratch, d.dtype, member_bytes / element);
        spans.push_back({member_bytes, scratch, nullptr});
        scratch += member_bytes;
      } else {
        if (r->input != r->output) {
          AdviseHugePages(r->output, member_bytes);
          huge_pages_.Collapse(r->input, member_bytes);
        }
        huge_pages_.Collapse(r->output, member_bytes);
        spans.push_back({member_bytes, static_cast<unsigned char*>(r->output),
                         r->input == r->output ? nullptr
                                               : static_cast<const unsigned char*>(r->input)});
      }
    }
  }

  {
    TimelineSpan span(timeline_, label, "ALLREDUCE", group.size(), bytes,
                      AllreduceAlgorithmName(algorithm));
    if (SharedMemoryAllreduce* shared = SharedMemoryFor(algorithm); shared != nullptr) {
      TFDIST_RETURN_IF_ERROR(
          AllreduceOnSegment(*shared, spans, bytes, d.dtype, d.op, d.postscale));
    } else {
      TFDIST_RETURN_IF_ERROR(RingAllreduceSpans(wire_, spans, d.dtype, d.op, d.postscale));
    }
  }

  if (packed_bytes > 0) {
    TimelineSpan span(timeline_, label, "FUSION_COPY_OUT", packed_count, packed_bytes);
    offset = 0;
    for (Request* r : group) {
      if (where_it_lies(*r)) continue;
      const size_t member_bytes = AccumulationBytes(r->description);
      if (!r->stand_in) std::memcpy(r->output, packed + offset, member_bytes);
      offset += member_bytes;
    }
  }
  CountAllreduce(label, group.size(), bytes, algorithm);
  return Status::OK();
}

Status CollectiveExecutor::RingCompressed(Request& request, AllreduceAlgorithm algorithm,
                                          size_t bytes) {
  const TensorDescription& d = request.description;
  const size_t count = static_cast<size_t>(d.num_elements());
  if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
  huge_pages_.Collapse(fusion_buffer_.data(), bytes);
  if (request.output != request.input) {
    AdviseHugePages(request.output, count * DataTypeSize(d.dtype));
  }
  const uint64_t sent_before = stats_.bytes_sent;
  {
    TimelineSpan span(timeline_, request.name, "ALLREDUCE", 1, bytes,
                      AllreduceAlgorithmName(algorithm));
    TFDIST_RETURN_IF_ERROR(RingAllreduceCompressed(wire_, request.input, d.dtype,
                                                   PackScale(d), fusion_buffer_.data(),
                                                   WireType(d), request.output, count, d.op));
  }
  if (UnpackScale(d) != 1.0) {
    TimelineSpan span(timeline_, request.name, "SCALE_OUTPUT", 1, bytes);
    ConvertScaled(request.output, d.dtype, request.output, d.dtype, count, UnpackScale(d));
  }
  CountSaved(sent_before, d);
  CountAllreduce(request.name, 1, bytes, algorithm);
  return Status::OK();
}

Status CollectiveExecutor::AllreduceFused(const std::vector<Request*>& group) {
  const TensorDescription& d = group[0]->description;
  const DataType accumulation = WireType(d);
  const size_t element = DataTypeSize(accumulation);
  const uint64_t sent_before = stats_.bytes_sent;
  size_t total = 0;
  for (const Request* r : group) total += static_cast<size_t>(r->description.num_elements());
  const size_t bytes = total * element;
  const AllreduceAlgorithm algorithm = Resolve(d.algorithm, bytes, accumulation);
  const std::string& label = group[0]->name;

  // One tensor reduced in its own type runs in its output buffer; anything
  // else is packed into the fusion buffer, converted to the accumulation type.
  const bool in_place = group.size() == 1 && accumulation == d.dtype;
  // A stand-in (join_state.h) runs the same steps on the identity, in the
  // fusion buffer, which it reuses, rather than in memory of its own.
  const bool stand_in = in_place && group[0]->stand_in;
  void* buffer = group[0]->output;
  if (stand_in) {
    if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
    buffer = fusion_buffer_.data();
  } else if (in_place && group[0]->input != buffer) {
    AdviseHugePages(buffer, bytes);
  }
  // Every algorithm reads the input where it lies and writes the result into
  // the output (allreduce.h: a transport algorithm's first step writes input
  // (op) received; "mpi" hands MPI_Allreduce both buffers), so a plain copy
  // of the input into TensorFlow's fresh output is not paid as a pass of its
  // own. Only a prescale (the copy applies it) still copies.
  const bool from_input = in_place && !stand_in && group[0]->input != buffer &&
                          PackScale(d) == 1.0;
  // A lone tensor's postscale is applied by the algorithm as it completes
  // each piece of the result (on every rank, a stand-in included, so that
  // all hold the same bits), not in a pass of its own; "mpi" scales after.
  const bool scale_inside = in_place && algorithm != AllreduceAlgorithm::kMpi;
  if (from_input) {
    // Nothing to copy in.
  } else if (in_place) {
    TimelineSpan span(timeline_, label, "COPY_INPUT", 1, bytes);
    CopyIn(*group[0], buffer, d.dtype, total);
  } else {
    TimelineSpan span(timeline_, label, "FUSION_COPY_IN", group.size(), bytes);
    if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
    buffer = fusion_buffer_.data();
    if (bytes > kLargestFusedTensorBytes) {
      // A large compressed tensor goes through here: what WhereTheyLie
      // does for its buffers (memory_advice.h) pays here too.
      huge_pages_.Collapse(buffer, bytes);
      for (const Request* r : group) {
        if (!r->stand_in && r->output != r->input) {
          AdviseHugePages(r->output, static_cast<size_t>(r->description.num_elements()) *
                                         DataTypeSize(d.dtype));
        }
      }
    }
    size_t offset = 0;
    for (const Request* r : group) {
      const size_t n = static_cast<size_t>(r->description.num_elements());
      CopyIn(*r, fusion_buffer_.data() + offset, accumulation, n);
      offset += n * element;
    }
  }

  {
    TimelineSpan span(timeline_, label, "ALLREDUCE", group.size(), bytes,
                      AllreduceAlgorithmName(algorithm));
    TFDIST_RETURN_IF_ERROR(Reduce(from_input ? group[0]->input : buffer, buffer, total,
                                  accumulation, d.op, algorithm,
                                  scale_inside ? UnpackScale(d) : 1.0));
  }

  if (in_place && !stand_in && !scale_inside && UnpackScale(d) != 1.0) {
    TimelineSpan span(timeline_, label, "SCALE_OUTPUT", 1, bytes);
    ConvertScaled(buffer, d.dtype, buffer, d.dtype, total, UnpackScale(d));
  } else if (!in_place) {
    TimelineSpan span(timeline_, label, "FUSION_COPY_OUT", group.size(), bytes);
    size_t offset = 0;
    for (Request* r : group) {
      const size_t n = static_cast<size_t>(r->description.num_elements());
      if (!r->stand_in) {  // nobody reads a stand-in's result
        ConvertScaled(fusion_buffer_.data() + offset, accumulation, r->output, d.dtype,
                      n, UnpackScale(d));
      }
      offset += n * element;
    }
  }

  CountSaved(sent_before, d);
  CountAllreduce(label, group.size(), bytes, algorithm);
  return Status::OK();
}

SharedMemoryAllreduce* CollectiveExecutor::SharedMemoryFor(AllreduceAlgorithm algorithm) const {
  // On one host, hierarchical over shared memory is its phase within the
  // host alone: the flat "shm" algorithm, as "hierarchical" there is its
  // reduce-scatter and allgather.
  if (algorithm == AllreduceAlgorithm::kSharedMemory ||
      (algorithm == AllreduceAlgorithm::kHierarchicalSharedMemory && hosts_.host_count() == 1)) {
    return shared_memory_.allreduce;
  }
  if (algorithm == AllreduceAlgorithm::kHierarchicalSharedMemory) {
    return shared_memory_.host_allreduce;
  }
  return nullptr;
}

Status CollectiveExecutor::AllreduceOnSegment(SharedMemoryAllreduce& segment,
                                              const std::vector<RingSpan>& spans,
                                              size_t bytes, DataType dtype, ReduceOp op,
                                              double result_scale) {
  CountSharedMemoryBytes(bytes, segment.size());
  if (&segment == shared_memory_.host_allreduce) {
    return HierarchicalAllreduceSpansOverSharedMemory(segment, wire_, hosts_,
                                                      CostModelPlanner(network_), spans, dtype,
                                                      op, result_scale);
  }
  return segment.AllreduceSpans(spans, dtype, op, result_scale);
}

void CollectiveExecutor::CountSharedMemoryBytes(size_t bytes, int sharing) {
  // Nothing goes through the transport: count what this rank copies into
  // its slot for the others, (P-1)/P of the buffer among P ranks sharing it.
  const uint64_t p = static_cast<uint64_t>(sharing);
  const uint64_t copied = (p - 1) * bytes / p;
  stats_.bytes_sent += copied;
  stats_.bytes_through_shared_memory += copied;
}

void CollectiveExecutor::CountSaved(uint64_t sent_before, const TensorDescription& d) {
  const size_t wire = DataTypeSize(WireType(d));
  const size_t full = DataTypeSize(AccumulationType(d.dtype));
  if (full <= wire) return;
  // Every algorithm sends whole elements, so the ratio is exact.
  stats_.bytes_saved_by_compression += (stats_.bytes_sent - sent_before) / wire * (full - wire);
}

void CollectiveExecutor::CountAllreduce(const std::string& label, size_t tensors, size_t bytes,
                                        AllreduceAlgorithm algorithm) {
  stats_.allreduce_calls++;
  stats_.tensors_reduced += tensors;
  stats_.bytes_reduced += bytes;
  stats_.algorithm_calls[static_cast<int>(algorithm)]++;
  Log("allreduce", label, tensors, bytes, AllreduceAlgorithmName(algorithm));
}

Status CollectiveExecutor::Allgather(Request& request,
                                     const std::vector<TensorDescription>& per_rank) {
  const TensorDescription& d = request.description;
  const size_t row_bytes = RowBytes(d);
  std::vector<size_t> bytes_per_rank(per_rank.size());
  int64_t rows = 0;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    bytes_per_rank[r] = static_cast<size_t>(per_rank[r].shape[0]) * row_bytes;
    rows += per_rank[r].shape[0];
  }
  void* output = nullptr;
  TFDIST_RETURN_IF_ERROR(request.allocate_output(WithFirstDimension(d, rows), &output));
  AdviseHugePages(output, static_cast<size_t>(rows) * row_bytes);
  const size_t total = static_cast<size_t>(rows) * row_bytes;
  {
    TimelineSpan span(timeline_, request.name, "ALLGATHER", 1, total, "ring");
    TFDIST_RETURN_IF_ERROR(RingAllgatherv(wire_, request.input,
                                          bytes_per_rank[transport_.rank()], output,
                                          bytes_per_rank));
  }
  stats_.allgather_calls++;
  Log("allgather", request.name, 1, total, "ring");
  return Status::OK();
}

Status CollectiveExecutor::Broadcast(Request& request) {
  const TensorDescription& d = request.description;
  const size_t bytes = static_cast<size_t>(d.num_elements()) * DataTypeSize(d.dtype);
  if (transport_.rank() == d.root) {
    ConvertScaled(request.input, d.dtype, request.output, d.dtype, d.num_elements(), 1.0);
  }
  {
    TimelineSpan span(timeline_, request.name, "BROADCAST", 1, bytes, "binomial");
    TFDIST_RETURN_IF_ERROR(BinomialBroadcast(wire_, request.output, bytes, d.root));
  }
  stats_.broadcast_calls++;
  Log("broadcast", request.name, 1, bytes, "binomial");
  return Status::OK();
}

Status CollectiveExecutor::Alltoall(Request& request,
                                    const std::vector<TensorDescription>& per_rank) {
  const TensorDescription& d = request.description;
  const int me = transport_.rank();
  const size_t row_bytes = RowBytes(d);
  std::vector<size_t> send_bytes(per_rank.size()), recv_bytes(per_rank.size());
  std::vector<int64_t> received_splits(per_rank.size());
  int64_t rows = 0;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    send_bytes[r] = static_cast<size_t>(d.splits[r]) * row_bytes;
    received_splits[r] = per_rank[r].splits[me];
    recv_bytes[r] = static_cast<size_t>(received_splits[r]) * row_bytes;
    rows += received_splits[r];
  }
  void* output = nullptr;
  TFDIST_RETURN_IF_ERROR(request.allocate_output(WithFirstDimension(d, rows), &output));
  TFDIST_RETURN_IF_ERROR(request.report_splits(received_splits));
  const size_t total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
  {
    TimelineSpan span(timeline_, request.name, "ALLTOALL", 1, total, "pairwise");
    TFDIST_RETURN_IF_ERROR(
        PairwiseAlltoallv(wire_, request.input, send_bytes, output, recv_bytes));
  }
  stats_.alltoall_calls++;
  Log("alltoall", request.name, 1, total, "pairwise");
  return Status::OK();
}

Status CollectiveExecutor::Reducescatter(Request& request) {
  const TensorDescription& d = request.description;
  const int size = transport_.size();
  const int me = transport_.rank();
  const int64_t rows = d.shape[0];
  const size_t row_elements = static_cast<size_t>(d.row_elements());
  // Rows split as evenly as possible; the first rows % P ranks get one more.
  std::vector<size_t> counts(size);
  size_t my_offset = 0;
  int64_t my_rows = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t rows_of_r = rows / size + (r < rows % size ? 1 : 0);
    counts[r] = static_cast<size_t>(rows_of_r) * row_elements;
    if (r < me) my_offset += counts[r];
    if (r == me) my_rows = rows_of_r;
  }
  void* output = nullptr;
  TFDIST_RETURN_IF_ERROR(request.allocate_output(WithFirstDimension(d, my_rows), &output));
  const DataType accumulation = AccumulationType(d.dtype);
  const size_t element = DataTypeSize(accumulation);
  const size_t total = static_cast<size_t>(d.num_elements());
  if (fusion_buffer_.size() < total * element) fusion_buffer_.resize(total * element);
  CopyIn(request, fusion_buffer_.data(), accumulation, total);
  {
    TimelineSpan span(timeline_, request.name, "REDUCESCATTER", 1, total * element, "ring");
    TFDIST_RETURN_IF_ERROR(
        RingReducescatter(wire_, fusion_buffer_.data(), counts, accumulation, d.op));
  }
  ConvertScaled(fusion_buffer_.data() + my_offset * element, accumulation, output, d.dtype,
                counts[me], d.postscale);
  stats_.reducescatter_calls++;
  Log("reducescatter", request.name, 1, total * element, "ring");
  return Status::OK();
}

Status CollectiveExecutor::Join(Request& request, int last_joined) {
  // Negotiation already waited for every rank's join: nothing to send.
  *static_cast<int32_t*>(request.output) = last_joined;
  Log("join", request.name, 1, 0, "negotiation");
  return Status::OK();
}

void CollectiveExecutor::CopyIn(const Request& request, void* destination,
                                DataType accumulation, size_t count) {
  const TensorDescription& d = request.description;
  if (request.stand_in) {
    FillIdentity(destination, count, accumulation, d.op);
  } else {
    ConvertScaled(request.input, d.dtype, destination, accumulation, count, PackScale(d));
  }
}

Status CollectiveExecutor::Barrier() { return control_plane_.Barrier(WaitKind::kRendezvous); }

void CollectiveExecutor::Log(const char* what, const std::string& name, size_t tensors,
                             size_t bytes, const char* detail) const {
  if (!debug_log_) return;
  std::fprintf(stderr, "tfdist[%d] %s '%s' tensors=%zu bytes=%zu algorithm=%s\n",
               transport_.rank(), what, name.c_str(), tensors, bytes, detail);
}

}  // namespace tfdist
