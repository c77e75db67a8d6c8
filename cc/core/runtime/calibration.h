// The link cost (L, G) the "auto" allreduce choice runs on: given by the
// user, read from a per-host cache, or measured once with a short ping-pong
// and then cached. Rank 0 decides and every rank gets its values, because
// all ranks must pick the same algorithm for the same tensor.
#ifndef TFDIST_CORE_RUNTIME_CALIBRATION_H_
#define TFDIST_CORE_RUNTIME_CALIBRATION_H_

#include "cc/core/collectives/cost_model.h"
#include "cc/core/runtime/config.h"
#include "cc/core/transport/mpi_transport.h"

namespace tfdist {

// Collective over `transport`: every rank must call it.
Status CalibrateLinkCost(MpiTransport& transport, const RuntimeConfig& config,
                         LinkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_CALIBRATION_H_
