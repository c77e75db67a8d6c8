#include "cc/core/runtime/calibration.h"

#include <cstdio>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include "cc/core/collectives/broadcast.h"
#include "cc/core/transport/mpi_wait.h"

namespace tfdist {

namespace {

// The measurement is between ranks 0 and 1, so it depends on which hosts
// they run on; the cache file is named after both. v3: the fastest round
// trip (v2 files hold medians, which a loaded machine inflates); v4: also
// the costs with every rank busy (LinkCost::memory_*).
Status CacheFileName(MpiTransport& transport, const std::string& dir, std::string* out) {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  char peer[MPI_MAX_PROCESSOR_NAME] = {0};
  if (transport.rank() == 1) {
    TFDIST_RETURN_IF_ERROR(transport.Send(0, name, sizeof name, 0));
  } else if (transport.rank() == 0) {
    TFDIST_RETURN_IF_ERROR(transport.Recv(1, peer, sizeof peer, 0));
  }
  *out = dir + "/linkcost-v4-" + std::string(name) + "-" + std::string(peer) + ".txt";
  return Status::OK();
}

bool ReadCache(const std::string& file, LinkCost* out) {
  std::ifstream in(file);
  LinkCost cost{};
  if (!(in >> cost.latency_s >> cost.seconds_per_byte >> cost.reduce_seconds_per_byte >>
        cost.memory_seconds_per_byte >> cost.memory_reduce_seconds_per_byte)) {
    return false;
  }
  if (cost.latency_s <= 0 || cost.seconds_per_byte <= 0 || cost.reduce_seconds_per_byte < 0 ||
      cost.memory_seconds_per_byte < 0 || cost.memory_reduce_seconds_per_byte < 0) {
    return false;
  }
  *out = cost;
  return true;
}

void WriteCache(const std::string& file, const LinkCost& cost) {
  // Write then rename, so that a reader never sees half a file.
  const std::string temporary = file + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream outfile(temporary);
    outfile.precision(17);
    outfile << cost.latency_s << " " << cost.seconds_per_byte << " "
            << cost.reduce_seconds_per_byte << " " << cost.memory_seconds_per_byte << " "
            << cost.memory_reduce_seconds_per_byte << "\n";
    if (!outfile) return;
  }
  std::rename(temporary.c_str(), file.c_str());
}

}  // namespace

namespace {

// The size of the highest-level cache of CPU 0, from sysfs (glibc's
// sysconf reports ten times the real L3 on some virtual machines); 0 if
// unknown.
double LastLevelCacheBytes() {
  int best_level = 0;
  double best_bytes = 0.0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    int level = 0;
    double size = 0.0;
    std::string unit;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    size_file >> unit;  // "K" or "M" after the number, if any
    if (unit == "K") size *= 1024.0;
    if (unit == "M") size *= 1024.0 * 1024.0;
    if (level > best_level) {
      best_level = level;
      best_bytes = size;
    }
  }
  return best_bytes;
}

// Rank 0's machine, for every rank: how many ranks share it, its cores and
// its last-level cache (NetworkCost's machine load).
Status DescribeMachine(MpiTransport& transport, NetworkCost* out) {
  MPI_Comm node;
  int rc = MPI_Comm_split_type(transport.comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_split_type");
  int ranks_on_node = 1;
  MPI_Comm_size(node, &ranks_on_node);
  MPI_Comm_free(&node);
  double machine[3] = {static_cast<double>(ranks_on_node),
                       static_cast<double>(std::thread::hardware_concurrency()), 0.0};
  machine[2] = LastLevelCacheBytes();
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, machine, sizeof machine, 0));
  out->ranks_per_machine = static_cast<int>(machine[0]);
  out->cores_per_machine = static_cast<int>(machine[1]);
  out->cache_bytes = machine[2];
  return Status::OK();
}

// The cost within a host, between rank 0 and `peer`.
Status CalibrateIntraHost(MpiTransport& transport, const HostLayout& hosts, int peer,
                          const RuntimeConfig& config,
                          LinkCost* out) {
  if (config.latency_seconds > 0 && config.seconds_per_byte > 0) {
    *out = LinkCost{config.latency_seconds, config.seconds_per_byte,
                    std::max(config.reduce_seconds_per_byte, 0.0)};
    return Status::OK();
  }
  if (transport.size() == 1) return MeasureLinkCost(transport, out);

  std::string cache_file;
  if (!config.calibration_cache_dir.empty()) {
    TFDIST_RETURN_IF_ERROR(CacheFileName(transport, config.calibration_cache_dir, &cache_file));
  }
  // Rank 0 says whether it found a cached value, and which.
  struct {
    LinkCost cost;
    int found;
  } cached{LinkCost{0, 0}, 0};
  if (transport.rank() == 0 && !cache_file.empty()) {
    cached.found = ReadCache(cache_file, &cached.cost) ? 1 : 0;
  }
  TFDIST_RETURN_IF_ERROR(BinomialBroadcast(transport, &cached, sizeof cached, 0));
  if (cached.found) {
    *out = cached.cost;
    return Status::OK();
  }
  TFDIST_RETURN_IF_ERROR(MeasureLinkCostTo(transport, peer, out));
  TFDIST_RETURN_IF_ERROR(MeasureLinkCostUnderLoad(transport, hosts, out));
  if (transport.rank() == 0 && !cache_file.empty()) WriteCache(cache_file, *out);
  return Status::OK();
}

}  // namespace

Status CalibrateNetworkCost(MpiTransport& transport, Transport& links, const HostLayout& hosts,
                            const RuntimeConfig& config, NetworkCost* out) {
  // Rank 0's host partner for the intra-host pair; with one rank per host
  // there is none and rank 1 stands in (its L and G then go unused).
  const std::vector<int>& home = hosts.ranks_of_host(hosts.host_of(0));
  const int intra_peer = home.size() > 1 ? home[1] : 1;
  // Between hosts first: the intra-host probe's 64 MiB messages teach the
  // MPI waits (polling_budget.h) to sleep rather than poll, which would
  // inflate a latency measured right after them.
  LinkCost inter{};
  if (hosts.host_count() > 1) {
    if (config.inter_host_latency_seconds > 0 && config.inter_host_seconds_per_byte > 0) {
      inter = LinkCost{config.inter_host_latency_seconds, config.inter_host_seconds_per_byte};
    } else {
      int inter_peer = 1;
      while (hosts.same_host(0, inter_peer)) ++inter_peer;
      TFDIST_RETURN_IF_ERROR(MeasureLinkCostTo(links, inter_peer, &inter));
    }
  }
  LinkCost intra{};
  TFDIST_RETURN_IF_ERROR(CalibrateIntraHost(transport, hosts, intra_peer, config, &intra));
  if (hosts.host_count() == 1) {
    inter = intra;
  } else {
    // Reducing a byte costs the host's time wherever the byte came from.
    inter.reduce_seconds_per_byte = intra.reduce_seconds_per_byte;
    inter.memory_seconds_per_byte = 0.0;
    inter.memory_reduce_seconds_per_byte = 0.0;
  }
  *out = NetworkCost{intra, inter};
  TFDIST_RETURN_IF_ERROR(DescribeMachine(transport, out));
  return Status::OK();
}

}  // namespace tfdist
