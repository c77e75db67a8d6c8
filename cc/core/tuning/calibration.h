// The step costs the "auto" allreduce choice runs on (step_costs.h
// NetworkCost). Within a host: given by the user (TFDIST_LATENCY,
// TFDIST_SECONDS_PER_BYTE, TFDIST_REDUCE_SECONDS_PER_BYTE: the survey's
// linear model), read from a cache, or measured (step_calibration.h) and then
// cached; the cache is named after the first two ranks' machines and how many
// ranks share rank 0's machine and host, since every rank of the machine
// takes part. Only rank 0 reads and writes the cache, creating its directory
// (TFDIST_CALIBRATION_CACHE_DIR, by default ~/.cache/tfdist) when it writes;
// a cache that cannot be written is one warning on rank 0's stderr, never an
// error, and the other ranks' directories do not matter. Between hosts (jobs on several real or virtual hosts): given by
// the user (TFDIST_INTER_HOST_LATENCY and TFDIST_INTER_HOST_SECONDS_PER_BYTE)
// or measured at every init, over the transport the collectives use, so with
// emulated links it measures the emulated link. Every rank gets rank 0's
// values, because all ranks must pick the same algorithm for the same tensor.
#ifndef TFDIST_CORE_TUNING_CALIBRATION_H_
#define TFDIST_CORE_TUNING_CALIBRATION_H_

#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/transport/transport.h"
#include "cc/core/tuning/step_costs.h"

namespace tfdist {

// The runtime settings (runtime/config.h) the calibration reads, under the
// same names.
struct CalibrationConfig {
  double latency_seconds = -1.0;
  double seconds_per_byte = -1.0;
  double reduce_seconds_per_byte = 0.0;
  double inter_host_latency_seconds = -1.0;
  double inter_host_seconds_per_byte = -1.0;
  std::string calibration_cache_dir;  // empty: do not cache the measurement
};

// The cache file in `dir` for a job whose ranks run on `machines` (every
// rank's machine name) and `hosts`.
std::string CalibrationCacheFile(const std::string& dir, const std::vector<std::string>& machines,
                                 const HostLayout& hosts);

// Collective over `transport`: every rank must call it. `links` is the
// transport the collectives run on (`transport`, or a wrapper of it);
// `hosts` says which ranks share a host, `machines` each rank's machine.
Status CalibrateNetworkCost(Transport& transport, Transport& links, const HostLayout& hosts,
                            const std::vector<std::string>& machines,
                            const CalibrationConfig& config, NetworkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_CALIBRATION_H_
