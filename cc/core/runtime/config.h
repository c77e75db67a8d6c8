// The runtime's settings. Python reads the TFDIST_* environment variables and
// init() arguments once (tfdist/config.py) and hands the result over as one
// "key=value;key=value" string; this is the only place that parses it.
#ifndef TFDIST_CORE_RUNTIME_CONFIG_H_
#define TFDIST_CORE_RUNTIME_CONFIG_H_

#include <cstddef>
#include <string>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/base/status.h"

namespace tfdist {

struct RuntimeConfig {
  // Used when an allreduce asks for no algorithm of its own.
  AllreduceAlgorithm default_algorithm = AllreduceAlgorithm::kAuto;
  // Timed calls of each of its candidates that "auto" makes per size class
  // before keeping the fastest (algorithm_chooser.h); 0: the model's pick,
  // untimed.
  int auto_trials = 5;
  // Fusion buffer size in bytes; 0 turns fusion off.
  size_t fusion_threshold_bytes = 64 << 20;
  // Longest pause between negotiation rounds while requests wait.
  double cycle_time_ms = 1.0;
  // Response cache capacity (tensors); 0 turns the cache off.
  size_t cache_capacity = 1024;
  double stall_check_seconds = 60.0;
  // 0 means never: the job keeps waiting after reporting the stall. Ten
  // minutes by default: far past any legitimate wait of one rank for another
  // (a rank-0 evaluation, a checkpoint), and a job that can never finish
  // ends with a message instead of holding its machines for good.
  double stall_shutdown_seconds = 600.0;
  // Past the shutdown time, evict the ranks that keep the collective waiting
  // (they exit; elastic training carries on without them) instead of
  // aborting the job. Python turns it on under tfdistrun --elastic.
  bool stall_eviction = false;
  // Link cost for the "auto" choice; negative means "measure or read the cache".
  double latency_seconds = -1.0;
  double seconds_per_byte = -1.0;
  // Used only with the two above; 0 gives the survey's formulas exactly.
  double reduce_seconds_per_byte = 0.0;
  // Inter-host link cost (step_costs.h NetworkCost); negative: measured at
  // init between ranks on different hosts (never cached).
  double inter_host_latency_seconds = -1.0;
  double inter_host_seconds_per_byte = -1.0;
  // Split the ranks into this many hosts of consecutive ranks (topology.h);
  // 0: the real hosts.
  int virtual_hosts = 0;
  // Emulated inter-host links (emulated_link_transport.h); bandwidth 0: off.
  double emulated_bandwidth = 0.0;  // bytes per second
  double emulated_latency = 0.0;    // seconds
  std::string calibration_cache_dir;  // empty: do not cache the measurement
  std::string timeline_path;          // empty: no timeline
  bool debug_log = false;             // one line per collective on stderr
  // Whether ranks on one host may reduce through shared memory (the "shm"
  // algorithm); the Python layer turns it off under MPI fault tolerance.
  bool shared_memory = true;
  // Online autotuning of fusion threshold, cycle time and per-size
  // algorithm overrides (autotuner.h); must agree across ranks.
  bool autotune = false;
  // CSV of the trials, per rank (".<rank>" appended with several); empty: none.
  std::string autotune_log_path;

  static Status Parse(const std::string& text, RuntimeConfig* out);
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_CONFIG_H_
