#include "cc/core/runtime/config.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace tfdist {

namespace {

Status ParseDouble(const std::string& key, const std::string& value, double* out) {
  char* end = nullptr;
  *out = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0') {
    return Status::InvalidArgument("tfdist config: " + key + "=" + value +
                                   " is not a number");
  }
  return Status::OK();
}

Status ParseSize(const std::string& key, const std::string& value, size_t* out) {
  double number = 0;
  TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &number));
  if (number < 0) {
    return Status::InvalidArgument("tfdist config: " + key + "=" + value +
                                   " must not be negative");
  }
  *out = static_cast<size_t>(number);
  return Status::OK();
}

}  // namespace

Status RuntimeConfig::Parse(const std::string& text, RuntimeConfig* out) {
  RuntimeConfig config;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument("tfdist config: '" + item + "' has no '='");
    }
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    if (key == "algorithm") {
      if (!ParseAllreduceAlgorithm(value, &config.default_algorithm)) {
        return Status::InvalidArgument(
            "tfdist config: unknown allreduce algorithm '" + value +
            "' (expected auto, tree, butterfly, ring, rabenseifner, hierarchical or mpi)");
      }
    } else if (key == "fusion_threshold") {
      TFDIST_RETURN_IF_ERROR(ParseSize(key, value, &config.fusion_threshold_bytes));
    } else if (key == "cycle_time_ms") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.cycle_time_ms));
    } else if (key == "auto_trials") {
      size_t trials = 0;
      TFDIST_RETURN_IF_ERROR(ParseSize(key, value, &trials));
      config.auto_trials = static_cast<int>(std::min<size_t>(trials, 1000));
    } else if (key == "cache_capacity") {
      TFDIST_RETURN_IF_ERROR(ParseSize(key, value, &config.cache_capacity));
    } else if (key == "stall_check_seconds") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.stall_check_seconds));
    } else if (key == "stall_shutdown_seconds") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.stall_shutdown_seconds));
    } else if (key == "stall_eviction") {
      config.stall_eviction = (value == "1");
    } else if (key == "latency_seconds") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.latency_seconds));
    } else if (key == "seconds_per_byte") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.seconds_per_byte));
    } else if (key == "reduce_seconds_per_byte") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.reduce_seconds_per_byte));
    } else if (key == "inter_host_latency_seconds") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.inter_host_latency_seconds));
    } else if (key == "inter_host_seconds_per_byte") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.inter_host_seconds_per_byte));
    } else if (key == "virtual_hosts") {
      double hosts = 0;
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &hosts));
      if (hosts < 0 || hosts != static_cast<int>(hosts)) {
        return Status::InvalidArgument("TFDIST_VIRTUAL_HOSTS=" + value +
                                       " must be a positive whole number of hosts");
      }
      config.virtual_hosts = static_cast<int>(hosts);
    } else if (key == "emulated_bandwidth") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.emulated_bandwidth));
      if (!(config.emulated_bandwidth > 0)) {
        return Status::InvalidArgument("TFDIST_EMULATED_BANDWIDTH=" + value +
                                       " must be a positive number of bytes per second");
      }
    } else if (key == "emulated_latency") {
      TFDIST_RETURN_IF_ERROR(ParseDouble(key, value, &config.emulated_latency));
      if (!(config.emulated_latency >= 0)) {
        return Status::InvalidArgument("TFDIST_EMULATED_LATENCY=" + value +
                                       " must be a non-negative number of seconds");
      }
    } else if (key == "calibration_cache_dir") {
      config.calibration_cache_dir = value;
    } else if (key == "timeline") {
      config.timeline_path = value;
    } else if (key == "debug_log") {
      config.debug_log = (value == "1");
    } else if (key == "shared_memory") {
      config.shared_memory = (value == "1");
    } else if (key == "autotune") {
      config.autotune = (value == "1");
    } else if (key == "autotune_log") {
      config.autotune_log_path = value;
    } else {
      return Status::InvalidArgument("tfdist config: unknown key '" + key + "'");
    }
  }
  *out = config;
  return Status::OK();
}

}  // namespace tfdist
