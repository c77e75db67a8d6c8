// The runtime tells its waits whether this node runs more ranks than cores
// (cc/tf/control_api.cc); a benchmark library built from its own copy of the
// core (benchmarks/_engine.py) has its own copy of that setting, set here.
#ifndef TFDIST_BENCHMARKS_NATIVE_RUNTIME_WAITING_H_
#define TFDIST_BENCHMARKS_NATIVE_RUNTIME_WAITING_H_

#include <mpi.h>

#include <thread>

#include "cc/mpi/mpi_wait.h"

namespace tfdist_bench {

inline void MatchRuntimeWaiting(MPI_Comm comm) {
  MPI_Comm node;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return;
  }
  int local_size = 1;
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  const unsigned cores = std::thread::hardware_concurrency();
  tfdist::SetCoresOversubscribed(cores > 0 && static_cast<unsigned>(local_size) > cores);
}

}  // namespace tfdist_bench

#endif  // TFDIST_BENCHMARKS_NATIVE_RUNTIME_WAITING_H_
