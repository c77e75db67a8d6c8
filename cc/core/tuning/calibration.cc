#include "cc/core/tuning/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/tuning/network_cost_codec.h"
#include "cc/core/tuning/step_calibration.h"

namespace tfdist {

namespace {

bool ReadCache(const std::string& file, StepCosts* out) {
  std::ifstream in(file);
  std::vector<double> values;
  double value = 0.0;
  while (in >> value) values.push_back(value);
  size_t offset = 0;
  StepCosts costs;
  if (!DecodeStepCosts(values, &offset, &costs).ok() || offset != values.size()) return false;
  *out = costs;
  return true;
}

// Writes the cache, creating its directory. Write then rename, so that a
// reader never sees half a file; on any failure the temporary file is
// removed and the reason returned.
Status WriteCache(const std::string& file, const StepCosts& costs) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), error);
  if (error) {
    return Status::Internal("cannot create " + std::filesystem::path(file).parent_path().string() +
                            ": " + error.message());
  }
  std::vector<double> values;
  AppendStepCosts(costs, &values);
  const std::string temporary = file + ".tmp" + std::to_string(::getpid());
  bool written = false;
  {
    std::ofstream outfile(temporary);
    if (outfile) {
      outfile.precision(17);
      for (double value : values) outfile << value << "\n";
      outfile.close();
      written = !outfile.fail();
    }
  }
  if (!written) {
    std::filesystem::remove(temporary, error);
    return Status::Internal("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), file.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::filesystem::remove(temporary, error);
    return Status::Internal("cannot rename " + temporary + " to " + file + ": " + reason);
  }
  return Status::OK();
}

// Rank 0's step costs for every rank, or false on every rank if it has none.
Status ShareRankZeros(Transport& transport, bool have, const StepCosts& mine, bool* found,
                      StepCosts* out) {
  std::vector<double> values;
  if (have) AppendStepCosts(mine, &values);
  double count = static_cast<double>(values.size());
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, &count, sizeof count, 0));
  *found = count > 0;
  if (!*found) return Status::OK();
  values.resize(static_cast<size_t>(count));
  TFDIST_RETURN_IF_ERROR(
      BinomialBroadcast(transport, values.data(), values.size() * sizeof(double), 0));
  size_t offset = 0;
  return DecodeStepCosts(values, &offset, out);
}

// A cached calibration is checked against a quick measurement of the same
// steps at these sizes (tens of ms); if it prices them more than
// kStaleCacheSlowdown times slower than they now take, it was taken on a
// busy machine and is measured again. A cache that is faster than the check
// is kept: a busy moment now must not replace a good calibration. Without
// this, one slow first init (a cached latency tens of times the real one) steered
// every later job on the host -- auto's picks and top-k's sparse-or-dense
// choice -- until someone deleted the file.
const std::vector<size_t>& CacheCheckSizes() {
  static const std::vector<size_t> sizes = {8, size_t{64} << 10};
  return sizes;
}
constexpr double kStaleCacheSlowdown = 1.5;

// The costs within a host, cached.
Status CalibrateIntraHost(Transport& transport, const HostLayout& hosts,
                          const std::vector<std::string>& machines,
                          const CalibrationConfig& config, StepCosts* out) {
  std::string cache_file;
  if (!config.calibration_cache_dir.empty()) {
    cache_file = CalibrationCacheFile(config.calibration_cache_dir, machines, hosts);
  }
  // Rank 0 says whether it found a cached value, and which.
  StepCosts cached;
  const bool read = transport.rank() == 0 && !cache_file.empty() && ReadCache(cache_file, &cached);
  bool found = false;
  TFDIST_RETURN_IF_ERROR(ShareRankZeros(transport, read, cached, &found, out));
  if (found) {
    // Every rank holds the same cached curves and the same check (the
    // measurement ends in an allreduce), so all decide alike.
    StepCosts check;
    TFDIST_RETURN_IF_ERROR(
        MeasureStepCosts(transport, hosts, LinkClass::kIntraHost, CacheCheckSizes(), &check));
    if (MedianSlowdown(*out, check) <= kStaleCacheSlowdown) return Status::OK();
  }
  TFDIST_RETURN_IF_ERROR(MeasureStepCosts(transport, hosts, LinkClass::kIntraHost,
                                          IntraHostCalibrationSizes(), out));
  if (transport.rank() == 0 && !cache_file.empty()) {
    // A cache that cannot be written costs the next init a measurement,
    // nothing more: one line says so, and init goes on.
    const Status written = WriteCache(cache_file, *out);
    if (!written.ok()) {
      std::fprintf(stderr,
                   "tfdist: warning: the link-cost calibration was not cached (%s); set "
                   "TFDIST_CALIBRATION_CACHE_DIR to a writable directory, or to the empty "
                   "string to turn the cache off\n",
                   written.message().c_str());
    }
  }
  return Status::OK();
}

}  // namespace

// v5: step curves (v4 files hold the single (L, G, R) of an idle pair and
// the memory costs). The measurement involves every rank of rank 0's
// machine, so the name says how many there are and how many of them form
// rank 0's (virtual) host, besides the machines of ranks 0 and 1.
std::string CalibrationCacheFile(const std::string& dir, const std::vector<std::string>& machines,
                                 const HostLayout& hosts) {
  const std::string name = machines.empty() ? std::string() : machines[0];
  const std::string peer = machines.size() > 1 ? machines[1] : std::string();
  const long on_machine = std::count(machines.begin(), machines.end(), name);
  return dir + "/linkcost-v5-" + name + "-" + peer + "-" + std::to_string(on_machine) +
         "on-machine-" + std::to_string(hosts.local_size(0)) + "on-host.txt";
}

Status CalibrateNetworkCost(Transport& transport, Transport& links, const HostLayout& hosts,
                            const std::vector<std::string>& machines,
                            const CalibrationConfig& config, NetworkCost* out) {
  if (transport.size() == 1) {
    *out = UniformNetwork(kDefaultLinkCost);
    return Status::OK();
  }
  const bool several_hosts = hosts.host_count() > 1;
  const bool inter_given =
      config.inter_host_latency_seconds > 0 && config.inter_host_seconds_per_byte > 0;
  // Between hosts first: the intra-host steps' 64 MiB messages teach the MPI
  // waits (polling_budget.h) to sleep rather than poll, which would inflate
  // the latencies measured right after them.
  StepCosts inter;
  if (several_hosts && !inter_given) {
    TFDIST_RETURN_IF_ERROR(MeasureStepCosts(links, hosts, LinkClass::kInterHost,
                                            InterHostCalibrationSizes(), &inter));
  }
  StepCosts intra;
  const bool intra_given = config.latency_seconds > 0 && config.seconds_per_byte > 0;
  const bool intra_known = intra_given || HasStepPair(hosts, LinkClass::kIntraHost);
  if (intra_given) {
    intra = StepCosts::FromLinkCost(LinkCost{config.latency_seconds, config.seconds_per_byte,
                                             std::max(config.reduce_seconds_per_byte, 0.0)});
  } else if (intra_known) {
    TFDIST_RETURN_IF_ERROR(CalibrateIntraHost(transport, hosts, machines, config, &intra));
  }
  if (several_hosts && inter_given) {
    // Reducing a byte costs the host's time wherever the byte came from.
    inter = StepCosts::FromLinkCost(
        LinkCost{config.inter_host_latency_seconds, config.inter_host_seconds_per_byte,
                 intra_known ? Summarize(intra).reduce_seconds_per_byte : 0.0});
  }
  if (!several_hosts) inter = intra;
  if (!intra_known) intra = inter;  // one rank per host: no step stays within one
  *out = NetworkCost{intra, inter};
  return Status::OK();
}

}  // namespace tfdist
