// The step costs the "auto" allreduce choice runs on (step_costs.h
// NetworkCost). Within a host: given by the user (TFDIST_LATENCY,
// TFDIST_SECONDS_PER_BYTE, TFDIST_REDUCE_SECONDS_PER_BYTE: the survey's
// linear model), read from a cache, or measured (step_calibration.h) and then
// cached; the cache is named after the first two ranks' hosts and how many
// ranks share rank 0's machine and host, since every rank of the machine
// takes part. Between hosts (jobs on several real or virtual hosts): given by
// the user (TFDIST_INTER_HOST_LATENCY and TFDIST_INTER_HOST_SECONDS_PER_BYTE)
// or measured at every init, over the transport the collectives use, so with
// emulated links it measures the emulated link. Every rank gets rank 0's
// values, because all ranks must pick the same algorithm for the same tensor.
#ifndef TFDIST_CORE_RUNTIME_CALIBRATION_H_
#define TFDIST_CORE_RUNTIME_CALIBRATION_H_

#include "cc/core/tuning/step_costs.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/runtime/config.h"
#include "cc/mpi/mpi_transport.h"

namespace tfdist {

// Collective over `transport`: every rank must call it. `links` is the
// transport the collectives run on (`transport`, or a wrapper of it);
// `hosts` says which ranks share a host.
Status CalibrateNetworkCost(MpiTransport& transport, Transport& links, const HostLayout& hosts,
                            const RuntimeConfig& config, NetworkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_CALIBRATION_H_
