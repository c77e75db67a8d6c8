// A C entry point for `python -m benchmarks.costmodel`: times one allreduce
// algorithm per call exactly as the runtime's collectives would run it -- on
// this job's (virtual) hosts, over the emulated links when they are set, with
// the runtime's link costs for hierarchical's cross-host choice -- but
// without negotiation or TensorFlow, so that the time is the algorithm's and
// comparable with the cost model's prediction. It runs on its own duplicate
// of the communicator, so it never meets the runtime's traffic.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "cc/core/collectives/allreduce.h"
#include "cc/core/transport/emulated_link_transport.h"
#include "cc/core/transport/mpi_transport.h"
#include "cc/tf/runtime_handle.h"

extern "C" {

// Runs `iterations` in-place sum allreduces of `count` elements of `dtype`
// on `buffer` with `algorithm` (a transport algorithm, not auto or mpi),
// each after a barrier, and stores this rank's seconds for each in
// `seconds[0..iterations)`. Needs tfdist.init(). Collective over the
// communicator. Returns 0, or a StatusCode with the message in `error`.
int tfdist_time_allreduce_on_hosts(uintptr_t comm_handle, int algorithm, void* buffer,
                                   uint64_t count, int dtype, int iterations, double* seconds,
                                   char* error, int error_length) {
  auto fail = [&](const tfdist::Status& s) {
    std::strncpy(error, s.message().c_str(), error_length - 1);
    error[error_length - 1] = '\0';
    return static_cast<int>(s.code());
  };
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return fail(tfdist::Status::FailedPrecondition("call tfdist.init() first"));
  std::unique_ptr<tfdist::MpiTransport> mpi;
  tfdist::Status status =
      tfdist::MpiTransport::Create(reinterpret_cast<MPI_Comm>(comm_handle), &mpi);
  if (!status.ok()) return fail(status);
  const tfdist::RuntimeConfig& config = handle.runtime->config();
  const tfdist::HostLayout& hosts = handle.topology.hosts;
  std::unique_ptr<tfdist::Transport> emulated;
  if (config.emulated_bandwidth > 0) {
    emulated = std::make_unique<tfdist::EmulatedLinkTransport>(
        *mpi, hosts.host_of_rank(),
        tfdist::EmulatedLink{config.emulated_bandwidth, config.emulated_latency});
  }
  tfdist::Transport& links = emulated ? *emulated : *mpi;
  tfdist::LinkCost inter_host = handle.runtime->network_cost().inter;
  inter_host.reduce_seconds_per_byte = handle.runtime->network_cost().intra.reduce_seconds_per_byte;
  for (int i = 0; i < iterations && status.ok(); ++i) {
    MPI_Barrier(mpi->comm());
    const double start = MPI_Wtime();
    status = tfdist::RunAllreduce(static_cast<tfdist::AllreduceAlgorithm>(algorithm), links, hosts,
                                  inter_host, buffer, count, static_cast<tfdist::DataType>(dtype),
                                  tfdist::ReduceOp::kSum);
    seconds[i] = MPI_Wtime() - start;
  }
  return status.ok() ? 0 : fail(status);
}

}  // extern "C"

extern "C" {

// Ping-pong of `bytes` between this rank and `peer` over the same transport
// as above, `iterations` round trips after a barrier each; this rank stores
// half of each round trip in `seconds` (the initiator is the lower rank).
// Every rank of the communicator calls it, each with its own peer (or -1 to
// only take part in the barriers). Returns 0, or a StatusCode with `error`.
int tfdist_time_ping_pong_on_hosts(uintptr_t comm_handle, int peer, void* buffer, uint64_t bytes,
                                   int iterations, double* seconds, char* error,
                                   int error_length) {
  auto fail = [&](const tfdist::Status& s) {
    std::strncpy(error, s.message().c_str(), error_length - 1);
    error[error_length - 1] = '\0';
    return static_cast<int>(s.code());
  };
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return fail(tfdist::Status::FailedPrecondition("call tfdist.init() first"));
  std::unique_ptr<tfdist::MpiTransport> mpi;
  tfdist::Status status =
      tfdist::MpiTransport::Create(reinterpret_cast<MPI_Comm>(comm_handle), &mpi);
  if (!status.ok()) return fail(status);
  const tfdist::RuntimeConfig& config = handle.runtime->config();
  std::unique_ptr<tfdist::Transport> emulated;
  if (config.emulated_bandwidth > 0) {
    emulated = std::make_unique<tfdist::EmulatedLinkTransport>(
        *mpi, handle.topology.hosts.host_of_rank(),
        tfdist::EmulatedLink{config.emulated_bandwidth, config.emulated_latency});
  }
  tfdist::Transport& links = emulated ? *emulated : *mpi;
  const bool initiator = peer > links.rank();
  for (int i = 0; i < iterations && status.ok(); ++i) {
    MPI_Barrier(mpi->comm());
    const double start = MPI_Wtime();
    if (peer >= 0 && initiator) {
      status = links.Send(peer, buffer, bytes, 1);
      if (status.ok()) status = links.Recv(peer, buffer, bytes, 1);
    } else if (peer >= 0) {
      status = links.Recv(peer, buffer, bytes, 1);
      if (status.ok()) status = links.Send(peer, buffer, bytes, 1);
    }
    seconds[i] = (MPI_Wtime() - start) / 2;
  }
  return status.ok() ? 0 : fail(status);
}

}  // extern "C"
