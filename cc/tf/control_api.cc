// The small C API the Python package calls through ctypes to start, stop and
// query the runtime. Tensors move through TF ops, or, for small eager
// allreduces, through eager_api.cc.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/base/data_type.h"
#include "cc/core/runtime/config.h"
#include "cc/core/runtime/stats.h"
#include "cc/mpi/mpi_runtime.h"
#include "cc/tf/c_api_status.h"
#include "cc/tf/runtime_handle.h"

namespace {

// The counters tfdist_stats reports, in its order; Python takes the names
// from tfdist_stat_name, so a counter added to Stats needs a line here and
// no Python edit.
struct Counter {
  const char* name;
  uint64_t (*read)(const tfdist::Stats&);
};
#define TFDIST_COUNTER(field) \
  { #field, [](const tfdist::Stats& s) -> uint64_t { return s.field.load(); } }
// Stats::<phase>_ns as "phase_ns.<phase>": Python groups them as stats()["phase_ns"].
#define TFDIST_PHASE(phase) \
  { "phase_ns." #phase, [](const tfdist::Stats& s) -> uint64_t { return s.phase##_ns.load(); } }
constexpr Counter kCounters[] = {
    TFDIST_COUNTER(allreduce_calls),
    TFDIST_COUNTER(tensors_reduced),
    TFDIST_COUNTER(bytes_reduced),
    TFDIST_COUNTER(allgather_calls),
    TFDIST_COUNTER(broadcast_calls),
    TFDIST_COUNTER(alltoall_calls),
    TFDIST_COUNTER(reducescatter_calls),
    TFDIST_COUNTER(negotiation_rounds),
    TFDIST_COUNTER(cached_rounds),
    TFDIST_COUNTER(errors),
    TFDIST_COUNTER(bytes_sent),
    TFDIST_COUNTER(bytes_through_shared_memory),
    TFDIST_PHASE(arrival),
    TFDIST_PHASE(pickup),
    TFDIST_PHASE(negotiation),
    TFDIST_PHASE(collectives),
    TFDIST_PHASE(completion),
    // What the same collectives would have sent without wire compression.
    {"bytes_uncompressed",
     [](const tfdist::Stats& s) -> uint64_t {
       return s.bytes_sent.load() + s.bytes_saved_by_compression.load();
     }},
};
#undef TFDIST_COUNTER
#undef TFDIST_PHASE
constexpr int kNamedCounters = static_cast<int>(std::size(kCounters));
// After the named counters: one per algorithm, "algorithm_calls.<name>".
constexpr int kAlgorithmCounters =
    static_cast<int>(std::extent<decltype(tfdist::Stats::algorithm_calls)>::value);

// The core's name functions answer "unknown" for a value that is none of theirs.
const char* KnownOrNull(int value, const char* name) {
  return value < 0 || std::strcmp(name, "unknown") == 0 ? nullptr : name;
}

const char* AlgorithmNameOrNull(int value) {
  return KnownOrNull(
      value, tfdist::AllreduceAlgorithmName(static_cast<tfdist::AllreduceAlgorithm>(value)));
}

const std::vector<std::string>& StatNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const Counter& counter : kCounters) all.emplace_back(counter.name);
    for (int i = 0; i < kAlgorithmCounters; ++i) {
      const char* algorithm = AlgorithmNameOrNull(i);
      all.push_back("algorithm_calls." + (algorithm ? std::string(algorithm) : std::to_string(i)));
    }
    return all;
  }();
  return names;
}

}  // namespace

extern "C" {

// The contract Python reads at run time instead of copying it: each returns
// the name for `value`, or nullptr once `value` is past the last one (values
// are dense from 0).

// StatusCode (cc/core/base/status.h): the codes the functions here return.
const char* tfdist_status_code_name(int value) {
  return value < 0 ? nullptr : tfdist::StatusCodeName(static_cast<tfdist::StatusCode>(value));
}

// AllreduceAlgorithm (cc/core/collectives/algorithm.h): the values of the ops'
// `algorithm` attribute and of tfdist_resolve_algorithm.
const char* tfdist_allreduce_algorithm_name(int value) { return AlgorithmNameOrNull(value); }

// DataType and ReduceOp (cc/core/base/data_type.h): Python keeps its own tables of
// these (TensorFlow dtypes by code, the public ReduceOp enum) and checks them
// against these names when it loads the library.
const char* tfdist_data_type_name(int value) {
  return KnownOrNull(value, tfdist::DataTypeName(static_cast<tfdist::DataType>(value)));
}

const char* tfdist_reduce_op_name(int value) {
  return KnownOrNull(value, tfdist::ReduceOpName(static_cast<tfdist::ReduceOp>(value)));
}

// The counters of tfdist_stats, by position.
const char* tfdist_stat_name(int index) {
  const std::vector<std::string>& names = StatNames();
  return index < 0 || index >= static_cast<int>(names.size()) ? nullptr
                                                              : names[index].c_str();
}

// `comm_handle` is the MPI_Comm handle of an mpi4py communicator. Returns 0,
// or a StatusCode with the message in `error`. Calling it while initialized
// does nothing and returns 0.
int tfdist_init(uintptr_t comm_handle, const char* config_text, char* error,
                int error_length) {
  if (tfdist::CurrentRuntime().runtime) return 0;
  tfdist::RuntimeConfig config;
  tfdist::Status status = tfdist::RuntimeConfig::Parse(config_text, &config);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  tfdist::RuntimeHandle handle;
  std::unique_ptr<tfdist::Runtime> runtime;
  status = tfdist::CreateMpiRuntime(comm_handle, config, &runtime, &handle.topology);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  handle.runtime = std::move(runtime);
  tfdist::SetCurrentRuntime(std::move(handle));
  return 0;
}

// `why` (or nullptr: the user called tfdist.shutdown()) completes "rank N
// ..." in the other ranks' errors: what this rank is doing by stopping.
// Stops every process set's runtime, in increasing id order, then the
// global set's.
void tfdist_shutdown(const char* why) {
  const std::string reason =
      why != nullptr && *why != '\0' ? why : tfdist::Runtime::kShutdownCalled;
  for (const tfdist::RuntimeHandle& set : tfdist::TakeAllProcessSets()) {
    if (set.runtime) set.runtime->Shutdown(reason);
  }
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  tfdist::SetCurrentRuntime(tfdist::RuntimeHandle());
  if (handle.runtime) handle.runtime->Shutdown(reason);
}

// At exit: bounds MPI_Finalize after a peer failure (mpi_runtime.h).
int tfdist_guard_exit(double seconds, int joined_after_failure) {
  return tfdist::GuardExitAfterPeerFailure(seconds, joined_after_failure != 0) ? 1 : 0;
}

int tfdist_is_initialized() { return tfdist::CurrentRuntime().runtime ? 1 : 0; }

// Fills rank, size, local_rank, local_size, cross_rank, cross_size; returns
// 0, or -1 when not initialized.
int tfdist_topology(int* out) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::Topology& t = handle.topology;
  const int values[6] = {t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size};
  std::memcpy(out, values, sizeof values);
  return 0;
}

// 1 when the runtime autotunes (TFDIST_AUTOTUNE), 0 when not, -1 when not
// initialized.
int tfdist_autotuning() {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  return handle.runtime->config().autotune ? 1 : 0;
}

// The counters named by tfdist_stat_name, in that order; returns how many
// were written, or -1 when not initialized.
int tfdist_stats(uint64_t* out, int capacity) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::Stats& stats = handle.runtime->stats();
  int written = 0;
  for (int i = 0; i < kNamedCounters && written < capacity; ++i) {
    out[written++] = kCounters[i].read(stats);
  }
  for (int i = 0; i < kAlgorithmCounters && written < capacity; ++i) {
    out[written++] = stats.algorithm_calls[i].load();
  }
  return written;
}

// The algorithm (AllreduceAlgorithm value) an allreduce of `bytes` runs with
// when it asks for `requested`; -1 when not initialized.
int tfdist_resolve_algorithm(int requested, uint64_t bytes) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  return static_cast<int>(handle.runtime->ResolveAlgorithm(
      static_cast<tfdist::AllreduceAlgorithm>(requested), bytes));
}

// The link cost within a host, as the survey's three numbers (the cost model
// itself uses the step curves, tfdist_network_cost): latency in seconds,
// seconds per byte on the wire, seconds per byte reduced.
int tfdist_link_cost(double* latency_s, double* seconds_per_byte,
                     double* reduce_seconds_per_byte) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::LinkCost cost = handle.runtime->link_cost();
  *latency_s = cost.latency_s;
  *seconds_per_byte = cost.seconds_per_byte;
  *reduce_seconds_per_byte = cost.reduce_seconds_per_byte;
  return 0;
}

}  // extern "C"
