// The C API through which tfdist/process_sets.py adds and removes process
// sets: each set a runtime of its own (runtime_handle.h), over the
// communicator Python made for it.
#include <cstdint>
#include <memory>
#include <vector>

#include "cc/mpi/mpi_runtime.h"
#include "cc/tf/c_api_status.h"
#include "cc/tf/runtime_handle.h"

extern "C" {

// Registers process set `id` of `ranks[0 .. rank_count)` (global ranks). On
// a member, `comm_handle` is the set's MPI_Comm (mpi4py handle) and this is
// collective over it: the set's runtime starts with the global set's
// settings and link costs. On any other rank `comm_handle` is 0 and only the
// set's ranks are recorded (for the "not in process set" error). Returns 0,
// or a StatusCode with the message in `error`.
int tfdist_add_process_set(int id, uintptr_t comm_handle, const int* ranks, int rank_count,
                           char* error, int error_length) {
  const tfdist::RuntimeHandle global = tfdist::CurrentRuntime();
  if (!global.runtime) {
    return tfdist::ReportStatus(tfdist::NotInitializedError("tfdist.add_process_set"), error,
                                error_length);
  }
  tfdist::RuntimeHandle handle;
  if (comm_handle != 0) {
    // The global set's autotuner alone tunes (and logs): a set's runtime
    // would write the same log file and measure a different step.
    tfdist::RuntimeConfig config = global.runtime->config();
    config.autotune = false;
    config.autotune_log_path.clear();
    std::unique_ptr<tfdist::Runtime> runtime;
    tfdist::Status status = tfdist::CreateMpiRuntime(
        comm_handle, config, global.runtime->network_cost(), &runtime, &handle.topology);
    if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
    handle.runtime = std::move(runtime);
  }
  std::vector<int> members(ranks, ranks + rank_count);
  tfdist::Status status = tfdist::AddProcessSet(id, std::move(members), handle);
  if (!status.ok() && handle.runtime) handle.runtime->Shutdown("failed to register a process set");
  return tfdist::ReportStatus(status, error, error_length);
}

// Unregisters process set `id` and, on a member, stops its runtime: its
// collectives still waiting fail, on every member. Returns 0, or a
// StatusCode with the message in `error`.
int tfdist_remove_process_set(int id, char* error, int error_length) {
  tfdist::RuntimeHandle handle;
  tfdist::Status status = tfdist::TakeProcessSet(id, &handle);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  if (handle.runtime) handle.runtime->Shutdown("removed the process set (tfdist.remove_process_set)");
  return 0;
}

// This rank's rank and the set's size within process set `id`; returns 0, or
// -1 when this rank has no runtime for it (not a member, or not registered).
int tfdist_process_set_topology(int id, int* rank, int* size) {
  tfdist::RuntimeHandle handle;
  if (!tfdist::ProcessSetRuntime(id, "", &handle).ok()) return -1;
  *rank = handle.topology.rank;
  *size = handle.topology.size;
  return 0;
}

}  // extern "C"
