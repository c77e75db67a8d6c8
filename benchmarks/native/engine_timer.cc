// Times one allreduce algorithm of the engine directly, without TensorFlow or
// the runtime, for benchmarks/allreduce.py and benchmarks/huge_pages.py.
//
// It is not part of libtfdist: benchmarks/_engine.py compiles it together
// with the framework-free core (cc/core, no runtime) into a library of its
// own under build/benchmarks/. Everything but the entry point is hidden, so
// that this copy of the core never binds to libtfdist's when both are loaded
// in one process. It runs on its own duplicate of the communicator, so it
// never interferes with the runtime's traffic.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "cc/core/collectives/allreduce.h"
#include "cc/mpi/mpi_allreduce.h"
#include "cc/mpi/mpi_transport.h"

extern "C" {

// Runs `iterations` in-place allreduces (sum) of `count` elements of `dtype`
// on `buffer` with `algorithm` (an AllreduceAlgorithm value other than auto)
// and stores this rank's average seconds per call. Collective over the
// communicator. Returns 0, or a StatusCode with the message in `error`.
__attribute__((visibility("default"))) int tfdist_engine_allreduce_seconds(
    uintptr_t comm_handle, int algorithm, void* buffer, uint64_t count, int dtype,
    int iterations, double* seconds, char* error, int error_length) {
  auto fail = [&](const tfdist::Status& s) {
    std::strncpy(error, s.message().c_str(), error_length - 1);
    error[error_length - 1] = '\0';
    return static_cast<int>(s.code());
  };
  const MPI_Comm comm = reinterpret_cast<MPI_Comm>(comm_handle);
  std::unique_ptr<tfdist::MpiTransport> transport;
  tfdist::Status status = tfdist::MpiTransport::Create(comm, &transport);
  if (!status.ok()) return fail(status);
  const auto chosen = static_cast<tfdist::AllreduceAlgorithm>(algorithm);
  const auto type = static_cast<tfdist::DataType>(dtype);
  MPI_Barrier(transport->comm());
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations && status.ok(); ++i) {
    status = chosen == tfdist::AllreduceAlgorithm::kMpi
                 ? tfdist::MpiNativeAllreduce(transport->comm(), buffer, buffer, count, type,
                                              tfdist::ReduceOp::kSum)
                 : tfdist::RunAllreduce(chosen, *transport, buffer, count, type,
                                        tfdist::ReduceOp::kSum);
  }
  *seconds = (MPI_Wtime() - start) / iterations;
  return status.ok() ? 0 : fail(status);
}

}  // extern "C"
