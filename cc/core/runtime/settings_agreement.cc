#include "cc/core/runtime/settings_agreement.h"

#include <cstring>
#include <sstream>
#include <string>

#include "cc/core/collectives/algorithm.h"

namespace tfdist {

namespace {

template <typename T>
std::string Text(T value) {
  std::ostringstream s;
  s.precision(17);
  s << value;
  return s.str();
}

// Compares one setting of every rank with rank 0's, as text.
template <typename Describe>
Status Agree(const std::vector<SharedSettings>& per_rank, const char* setting,
             Describe describe) {
  const std::string expected = describe(per_rank[0]);
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const std::string actual = describe(per_rank[r]);
    if (actual != expected) {
      return Status::FailedPrecondition(
          "ranks disagree on " + std::string(setting) + ": rank 0 has " +
          expected + ", rank " + std::to_string(r) + " has " + actual +
          "; every rank must use the same value (environment variable or init() argument)");
    }
  }
  return Status::OK();
}

}  // namespace

SharedSettings SharedSettingsOf(const RuntimeConfig& config) {
  SharedSettings s;
  s.default_algorithm = static_cast<int32_t>(config.default_algorithm);
  s.fusion_threshold_bytes = config.fusion_threshold_bytes;
  s.cache_capacity = config.cache_capacity;
  s.auto_trials = config.auto_trials;
  s.latency_seconds = config.latency_seconds;
  s.seconds_per_byte = config.seconds_per_byte;
  s.reduce_seconds_per_byte = config.reduce_seconds_per_byte;
  s.inter_host_latency_seconds = config.inter_host_latency_seconds;
  s.inter_host_seconds_per_byte = config.inter_host_seconds_per_byte;
  s.virtual_hosts = config.virtual_hosts;
  s.emulated_bandwidth = config.emulated_bandwidth;
  s.emulated_latency = config.emulated_latency;
  s.autotune = config.autotune ? 1 : 0;
  s.shared_memory = config.shared_memory ? 1 : 0;
  return s;
}

Status CheckSettingsAgree(const std::vector<SharedSettings>& per_rank) {
  if (per_rank.empty()) return Status::OK();
  using S = SharedSettings;
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_FUSION_THRESHOLD",
                               [](const S& s) { return Text(s.fusion_threshold_bytes); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_CACHE_CAPACITY",
                               [](const S& s) { return Text(s.cache_capacity); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_AUTO_TRIALS",
                               [](const S& s) { return Text(s.auto_trials); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_ALLREDUCE_ALGORITHM", [](const S& s) {
    return std::string(
        AllreduceAlgorithmName(static_cast<AllreduceAlgorithm>(s.default_algorithm)));
  }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_LATENCY",
                               [](const S& s) { return Text(s.latency_seconds); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_SECONDS_PER_BYTE",
                               [](const S& s) { return Text(s.seconds_per_byte); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_REDUCE_SECONDS_PER_BYTE",
                               [](const S& s) { return Text(s.reduce_seconds_per_byte); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_INTER_HOST_LATENCY",
                               [](const S& s) { return Text(s.inter_host_latency_seconds); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_INTER_HOST_SECONDS_PER_BYTE",
                               [](const S& s) { return Text(s.inter_host_seconds_per_byte); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_VIRTUAL_HOSTS", [](const S& s) {
    return s.virtual_hosts > 0 ? Text(s.virtual_hosts) : std::string("unset");
  }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_EMULATED_BANDWIDTH", [](const S& s) {
    return s.emulated_bandwidth > 0 ? Text(s.emulated_bandwidth) : std::string("unset");
  }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_EMULATED_LATENCY",
                               [](const S& s) { return Text(s.emulated_latency); }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_AUTOTUNE", [](const S& s) {
    return std::string(s.autotune ? "1" : "0");
  }));
  TFDIST_RETURN_IF_ERROR(Agree(per_rank, "TFDIST_SHARED_MEMORY", [](const S& s) {
    return std::string(s.shared_memory ? "1" : "0");
  }));
  return Status::OK();
}

Status CheckSettingsAgreeAcross(ControlPlane& control_plane, const RuntimeConfig& config) {
  const SharedSettings mine = SharedSettingsOf(config);
  std::vector<uint8_t> bytes(sizeof mine);
  std::memcpy(bytes.data(), &mine, sizeof mine);
  std::vector<std::vector<uint8_t>> gathered;
  // kIdle: this wait, for ranks still starting up, says nothing about how
  // long waits for work take, and must not teach the polling budget of the
  // thread that will run eager rounds (mpi_wait.cc) that they are long.
  TFDIST_RETURN_IF_ERROR(
      control_plane.Allgatherv(bytes, WaitKind::kIdle, &gathered));
  std::vector<SharedSettings> per_rank(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    if (gathered[r].size() != sizeof(SharedSettings)) {
      return Status::Internal("the settings of rank " + std::to_string(r) + " arrived as " +
                              std::to_string(gathered[r].size()) + " bytes, not " +
                              std::to_string(sizeof(SharedSettings)));
    }
    std::memcpy(&per_rank[r], gathered[r].data(), sizeof(SharedSettings));
  }
  return CheckSettingsAgree(per_rank);
}

}  // namespace tfdist
