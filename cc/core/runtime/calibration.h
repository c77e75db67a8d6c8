// The link costs the "auto" allreduce choice runs on (cost_model.h
// NetworkCost). Within a host: given by the user, read from a per-host
// cache, or measured once with a short ping-pong and then cached. Between
// hosts (jobs on several real or virtual hosts): given by the user
// (TFDIST_INTER_HOST_LATENCY and TFDIST_INTER_HOST_SECONDS_PER_BYTE) or
// measured at every init between rank 0 and the first rank of another host,
// over the transport the collectives use, so with emulated links it measures
// the emulated link. Rank 0 decides and every rank gets its values, because
// all ranks must pick the same algorithm for the same tensor.
#ifndef TFDIST_CORE_RUNTIME_CALIBRATION_H_
#define TFDIST_CORE_RUNTIME_CALIBRATION_H_

#include "cc/core/collectives/cost_model.h"
#include "cc/core/runtime/config.h"
#include "cc/core/transport/mpi_transport.h"

namespace tfdist {

// Collective over `transport`: every rank must call it. `links` is the
// transport the collectives run on (`transport`, or a wrapper of it);
// `hosts` says which ranks share a host.
Status CalibrateNetworkCost(MpiTransport& transport, Transport& links, const HostLayout& hosts,
                            const RuntimeConfig& config, NetworkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_CALIBRATION_H_
