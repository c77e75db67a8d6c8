// Times allreduce algorithms and point-to-point messages as the runtime's
// collectives would run them on this job's (virtual) hosts -- over the
// emulated links when they are set, with the runtime's link costs for
// hierarchical's cross-host choice -- but without negotiation or TensorFlow,
// for benchmarks/costmodel.py: the time is the algorithm's, comparable with
// the cost model's prediction.
//
// Not part of libtfdist: benchmarks/_engine.py compiles it into the
// benchmarks' own library. The caller passes what the runtime knows (the
// host of every rank, the emulated link, the inter-host link cost), read
// through tfdist's public API. Each call runs on its own duplicate of the
// communicator, so it never meets the runtime's traffic.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "cc/core/collectives/allreduce.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/tuning/hierarchical_planner.h"
#include "cc/core/tuning/network_cost_codec.h"
#include "cc/core/transport/emulated_link_transport.h"
#include "cc/mpi/mpi_transport.h"

namespace {

int Fail(const tfdist::Status& s, char* error, int error_length) {
  std::strncpy(error, s.message().c_str(), error_length - 1);
  error[error_length - 1] = '\0';
  return static_cast<int>(s.code());
}

// The transport the runtime's collectives use: MPI, under the emulated links
// when `bytes_per_second` > 0.
class HostLinks {
 public:
  tfdist::Status Open(MPI_Comm comm, const int* host_of_rank, double bytes_per_second,
                      double latency_s) {
    TFDIST_RETURN_IF_ERROR(tfdist::MpiTransport::Create(comm, &mpi_));
    hosts_.assign(host_of_rank, host_of_rank + mpi_->size());
    if (bytes_per_second > 0) {
      const tfdist::EmulatedLink link{bytes_per_second, latency_s};
      TFDIST_RETURN_IF_ERROR(tfdist::CheckEmulatedLink(link));
      emulated_ = std::make_unique<tfdist::EmulatedLinkTransport>(*mpi_, hosts_, link);
    }
    return tfdist::Status::OK();
  }
  tfdist::Transport& links() {
    if (emulated_) return *emulated_;
    return *mpi_;
  }
  const std::vector<int>& host_of_rank() const { return hosts_; }
  MPI_Comm comm() const { return mpi_->comm(); }

 private:
  std::unique_ptr<tfdist::MpiTransport> mpi_;
  std::unique_ptr<tfdist::EmulatedLinkTransport> emulated_;
  std::vector<int> hosts_;
};

}  // namespace

extern "C" {

// Runs `iterations` in-place sum allreduces of `count` elements of `dtype`
// on `buffer` with `algorithm` (a transport algorithm, not auto or mpi),
// each after a barrier, and stores this rank's seconds for each in
// `seconds[0..iterations)`. `host_of_rank` labels every rank's host;
// `bytes_per_second` > 0 emulates links between hosts (with `latency_s`);
// `network` = the `network_values` values of tfdist.runtime.network_cost_values
// (network_cost_codec.h) is the cost hierarchical chooses its segments and
// cross-host algorithm by. Collective over the communicator. Returns 0, or a
// StatusCode with the message in `error`.
__attribute__((visibility("default"))) int tfdist_costmodel_allreduce_seconds(
    uintptr_t comm_handle, const int* host_of_rank, double bytes_per_second, double latency_s,
    const double* network, int64_t network_values, int algorithm, void* buffer, uint64_t count,
    int dtype, int iterations, double* seconds, char* error, int error_length) {
  HostLinks links;
  tfdist::Status status = links.Open(reinterpret_cast<MPI_Comm>(comm_handle), host_of_rank,
                                     bytes_per_second, latency_s);
  if (!status.ok()) return Fail(status, error, error_length);
  const tfdist::HostLayout hosts = tfdist::HostLayout::FromHostLabels(links.host_of_rank());
  tfdist::NetworkCost cost;
  status = tfdist::DecodeNetworkCost(std::vector<double>(network, network + network_values),
                                     &cost);
  if (!status.ok()) return Fail(status, error, error_length);
  for (int i = 0; i < iterations && status.ok(); ++i) {
    MPI_Barrier(links.comm());
    const double start = MPI_Wtime();
    status = tfdist::RunAllreduce(static_cast<tfdist::AllreduceAlgorithm>(algorithm),
                                  links.links(), hosts, tfdist::CostModelPlanner(cost), buffer, count,
                                  static_cast<tfdist::DataType>(dtype), tfdist::ReduceOp::kSum);
    seconds[i] = MPI_Wtime() - start;
  }
  return status.ok() ? 0 : Fail(status, error, error_length);
}

// Ping-pong of `bytes` between this rank and `peer` over the same links,
// `iterations` round trips after a barrier each; this rank stores half of
// each round trip in `seconds` (the initiator is the lower rank). Every rank
// of the communicator calls it, each with its own peer (or -1 to only take
// part in the barriers). Returns 0, or a StatusCode with `error`.
__attribute__((visibility("default"))) int tfdist_costmodel_ping_pong_seconds(
    uintptr_t comm_handle, const int* host_of_rank, double bytes_per_second, double latency_s,
    int peer, void* buffer, uint64_t bytes, int iterations, double* seconds, char* error,
    int error_length) {
  HostLinks links;
  tfdist::Status status = links.Open(reinterpret_cast<MPI_Comm>(comm_handle), host_of_rank,
                                     bytes_per_second, latency_s);
  if (!status.ok()) return Fail(status, error, error_length);
  tfdist::Transport& wire = links.links();
  const bool initiator = peer > wire.rank();
  for (int i = 0; i < iterations && status.ok(); ++i) {
    MPI_Barrier(links.comm());
    const double start = MPI_Wtime();
    if (peer >= 0 && initiator) {
      status = wire.Send(peer, buffer, bytes, 1);
      if (status.ok()) status = wire.Recv(peer, buffer, bytes, 1);
    } else if (peer >= 0) {
      status = wire.Recv(peer, buffer, bytes, 1);
      if (status.ok()) status = wire.Send(peer, buffer, bytes, 1);
    }
    seconds[i] = (MPI_Wtime() - start) / 2;
  }
  return status.ok() ? 0 : Fail(status, error, error_length);
}

}  // extern "C"
