// The small C API the Python package calls through ctypes to start, stop and
// query the runtime. Tensors move through TF ops, or, for small eager
// allreduces, through eager_api.cc.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "cc/core/runtime/config.h"
#include "cc/core/transport/mpi_wait.h"
#include "cc/tf/c_api_status.h"
#include "cc/tf/runtime_handle.h"

extern "C" {

// `comm_handle` is the MPI_Comm handle of an mpi4py communicator. Returns 0,
// or a StatusCode with the message in `error`. Calling it while initialized
// does nothing and returns 0.
int tfdist_init(uintptr_t comm_handle, const char* config_text, char* error,
                int error_length) {
  if (tfdist::CurrentRuntime().runtime) return 0;
  tfdist::RuntimeConfig config;
  tfdist::Status status = tfdist::RuntimeConfig::Parse(config_text, &config);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  MPI_Comm comm = reinterpret_cast<MPI_Comm>(comm_handle);
  tfdist::RuntimeHandle handle;
  // The real machine (not virtual hosts) decides whether ranks share cores.
  tfdist::Topology machine;
  status = tfdist::DiscoverTopology(comm, /*virtual_hosts=*/0, &machine);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  // More ranks on this node than cores (mpirun --oversubscribe): waiting
  // ranks must yield their core to the peers they wait for.
  const unsigned cores = std::thread::hardware_concurrency();
  tfdist::SetCoresOversubscribed(cores > 0 && static_cast<unsigned>(machine.local_size) > cores);
  std::unique_ptr<tfdist::Runtime> runtime;
  status = tfdist::Runtime::Create(comm, config, &runtime);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  handle.topology = runtime->topology();
  handle.runtime = std::move(runtime);
  tfdist::SetCurrentRuntime(std::move(handle));
  return 0;
}

void tfdist_shutdown() {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  tfdist::SetCurrentRuntime({});
  if (handle.runtime) handle.runtime->Shutdown();
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

// Counters in the order tfdist/runtime.py names them; returns how many were
// written, or -1 when not initialized.
int tfdist_stats(uint64_t* out, int capacity) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::Stats& s = handle.runtime->stats();
  const uint64_t values[] = {
      s.allreduce_calls, s.tensors_reduced, s.bytes_reduced, s.allgather_calls,
      s.broadcast_calls, s.alltoall_calls, s.reducescatter_calls,
      s.negotiation_rounds, s.cached_rounds, s.errors,
      s.algorithm_calls[0], s.algorithm_calls[1], s.algorithm_calls[2],
      s.algorithm_calls[3], s.algorithm_calls[4], s.algorithm_calls[5],
      s.algorithm_calls[6]};
  const int n = static_cast<int>(sizeof values / sizeof values[0]);
  const int written = n < capacity ? n : capacity;
  std::memcpy(out, values, written * sizeof(uint64_t));
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

// The link cost the cost model uses: latency in seconds, seconds per byte
// on the wire, seconds per byte reduced.
int tfdist_link_cost(double* latency_s, double* seconds_per_byte,
                     double* reduce_seconds_per_byte) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::LinkCost& cost = handle.runtime->link_cost();
  *latency_s = cost.latency_s;
  *seconds_per_byte = cost.seconds_per_byte;
  *reduce_seconds_per_byte = cost.reduce_seconds_per_byte;
  return 0;
}

}  // extern "C"
