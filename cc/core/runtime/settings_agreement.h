// The settings every rank must share. Ranks that fuse differently, keep
// response caches of different sizes, default to different algorithms or
// calibrate the link differently would run different collectives against
// each other: a hang or a wrong result, far from the cause. init() compares
// them across ranks first and fails on every rank, naming the setting.
#ifndef TFDIST_CORE_RUNTIME_SETTINGS_AGREEMENT_H_
#define TFDIST_CORE_RUNTIME_SETTINGS_AGREEMENT_H_

#include <cstdint>
#include <vector>

#include "cc/core/runtime/config.h"
#include "cc/core/base/status.h"
#include "cc/core/control/control_plane.h"

namespace tfdist {

// Plain values only: it travels between ranks as bytes.
struct SharedSettings {
  int32_t default_algorithm = 0;
  uint64_t fusion_threshold_bytes = 0;
  uint64_t cache_capacity = 0;
  int32_t auto_trials = 0;
  double latency_seconds = 0;
  double seconds_per_byte = 0;
  double reduce_seconds_per_byte = 0;
  double inter_host_latency_seconds = 0;
  double inter_host_seconds_per_byte = 0;
  int32_t virtual_hosts = 0;
  double emulated_bandwidth = 0;
  double emulated_latency = 0;
  // The negotiation's bit exchange carries the tuner's words only with it.
  int32_t autotune = 0;
  // Making the shared segment is collective: every rank must mean to.
  int32_t shared_memory = 0;
};

SharedSettings SharedSettingsOf(const RuntimeConfig& config);

// OK when every rank's settings equal rank 0's; otherwise FailedPrecondition
// naming the first differing setting (by its TFDIST_ variable), the rank and
// both values.
Status CheckSettingsAgree(const std::vector<SharedSettings>& per_rank);

// Collective: gathers every rank's settings over `control_plane` and checks
// them, so that every rank reaches the same verdict.
Status CheckSettingsAgreeAcross(ControlPlane& control_plane, const RuntimeConfig& config);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_SETTINGS_AGREEMENT_H_
