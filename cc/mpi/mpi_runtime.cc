#include "cc/mpi/mpi_runtime.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "cc/core/tuning/calibration.h"
#include "cc/core/runtime/host_shared_memory.h"
#include "cc/core/runtime/settings_agreement.h"
#include "cc/core/transport/emulated_link_transport.h"
#include "cc/mpi/mpi_allreduce.h"
#include "cc/mpi/mpi_control_plane.h"
#include "cc/mpi/mpi_error.h"
#include "cc/mpi/mpi_transport.h"
#include "cc/core/control/transport_control_plane.h"
#include "cc/mpi/mpi_wait.h"

namespace tfdist {

namespace {

// The control plane over emulated links: negotiation pays the modelled
// latency and bandwidth like the collectives do. Aborting and the end of MPI
// are still MPI's.
class EmulatedControlPlane : public TransportControlPlane {
 public:
  EmulatedControlPlane(Transport& links, MpiControlPlane& mpi)
      : TransportControlPlane(links, [&mpi](const std::string& reason) { mpi.Abort(reason); }),
        mpi_(mpi) {}
  bool closed() const override { return mpi_.closed(); }

 private:
  MpiControlPlane& mpi_;
};

// What the runtime talks through, kept alive by it (RuntimeLinks::owner).
// Declared in the order they are built: each may use the ones above it.
struct MpiLinks {
  std::unique_ptr<MpiTransport> transport;
  std::unique_ptr<MpiControlPlane> control_plane;
  std::unique_ptr<EmulatedLinkTransport> emulated_transport;  // or null
  std::unique_ptr<EmulatedControlPlane> emulated_control_plane;  // or null
  HostSharedMemory shared_memory;  // every rank's, on one machine; or empty
  HostSharedMemory host_shared_memory;  // this rank's host's, of several; or empty
};

// Each rank's two slots of the "shm" algorithm. Small enough that a chunk's
// working set (its part of the input and the output, this rank's slot and
// the peers') stays in the caches, large enough that a chunk's three waits
// are a small part of its time. A probe at np 2 (two runs, each slot size
// against MPI_Allreduce in the same minute, 1-16 MiB): 256 KiB slots took
// 0.46-0.70 of MPI's time, 64 KiB 0.59-1.20, 128 KiB 0.55-1.10 and 4 MiB
// 0.53-0.95; 512 KiB and 1 MiB were slower again at 16 MiB.
constexpr size_t kSharedMemorySlotBytes = 256u << 10;

// Why the ranks of this runtime cannot run the "shm" algorithm; empty where
// they can. Where they share one machine it is up to the shared segment.
// `machines`: the ranks' real machines, as hosts.
std::string WhyNoSharedMemory(const RuntimeConfig& config, const HostLayout& machines) {
  if (!config.shared_memory) {
    return "TFDIST_SHARED_MEMORY=0 (or MPI fault tolerance, under which it is off)";
  }
  if (config.virtual_hosts > 0) {
    return "TFDIST_VIRTUAL_HOSTS splits the ranks into hosts that must not share memory";
  }
  if (machines.host_count() > 1) return "the ranks are on more than one host";
  return "";
}

// What MPI calls this process's machine; ranks with the same name share a
// host (runtime/topology.h).
std::string ProcessorName() {
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return std::string(name);
}

// This process's virtual host (TFDIST_VIRTUAL_HOSTS) since its first
// runtime, -1 before: process-wide, like the process itself, so that a
// runtime rebuilt after a membership change puts it on the same host.
int32_t& ThisProcessVirtualHost() {
  static int32_t host = -1;
  return host;
}

CalibrationConfig CalibrationSettings(const RuntimeConfig& config) {
  CalibrationConfig out;
  out.latency_seconds = config.latency_seconds;
  out.seconds_per_byte = config.seconds_per_byte;
  out.reduce_seconds_per_byte = config.reduce_seconds_per_byte;
  out.inter_host_latency_seconds = config.inter_host_latency_seconds;
  out.inter_host_seconds_per_byte = config.inter_host_seconds_per_byte;
  out.calibration_cache_dir = config.calibration_cache_dir;
  return out;
}

// `inherited`: link costs to use instead of calibrating (null: calibrate).
Status CreateRuntime(MPI_Comm comm, const RuntimeConfig& config, const NetworkCost* inherited,
                     std::unique_ptr<Runtime>* out, Topology* topology) {
  auto mpi = std::make_shared<MpiLinks>();
  TFDIST_RETURN_IF_ERROR(MpiTransport::Create(comm, &mpi->transport));
  TFDIST_RETURN_IF_ERROR(MpiControlPlane::Create(comm, &mpi->control_plane));
  // The real machine (not virtual hosts) decides whether ranks share cores.
  Topology machine;
  TFDIST_RETURN_IF_ERROR(DiscoverTopology(*mpi->control_plane, ProcessorName(),
                                          /*virtual_hosts=*/0, &machine));
  // More ranks of this communicator on this node than cores (mpirun
  // --oversubscribe): its waiting ranks must yield their core to the peers
  // they wait for. Decided per runtime, by its own ranks: a process set of
  // two ranks of a four-rank job on two cores waits only for its two (the
  // others, outside the set, sleep or compute on their own), and yielding at
  // every poll made its collectives slower than those of a two-rank job
  // (issue 24). The global runtime of the same processes keeps its own.
  const bool oversubscribed = CoresOversubscribed(machine.local_size);
  mpi->transport->set_cores_oversubscribed(oversubscribed);
  mpi->control_plane->set_cores_oversubscribed(oversubscribed);
  // Before anything collective that depends on them (the calibration does).
  TFDIST_RETURN_IF_ERROR(CheckSettingsAgreeAcross(*mpi->control_plane, config));
  if (inherited == nullptr && config.virtual_hosts > 0) {
    // The global set: each process keeps its virtual host across membership
    // changes (elastic training), so that the hosts follow the survivors.
    std::vector<std::vector<uint8_t>> per_rank;
    const int32_t mine = ThisProcessVirtualHost();
    TFDIST_RETURN_IF_ERROR(mpi->control_plane->Allgatherv(
        std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&mine),
                             reinterpret_cast<const uint8_t*>(&mine) + sizeof(mine)),
        WaitKind::kTransfer, &per_rank));
    std::vector<int> kept;
    for (const std::vector<uint8_t>& bytes : per_rank) {
      int32_t host = -1;
      if (bytes.size() == sizeof(host)) std::memcpy(&host, bytes.data(), sizeof(host));
      kept.push_back(host);
    }
    TFDIST_RETURN_IF_ERROR(TopologyFromKeptVirtualHosts(machine.rank, machine.machines, kept,
                                                        config.virtual_hosts, topology));
    ThisProcessVirtualHost() = topology->virtual_host_labels[machine.rank];
  } else {
    TFDIST_RETURN_IF_ERROR(
        TopologyFromMachines(machine.rank, machine.machines, config.virtual_hosts, topology));
  }
  RuntimeLinks links;
  links.transport = mpi->transport.get();
  links.control_plane = mpi->control_plane.get();
  if (config.emulated_bandwidth > 0) {
    const EmulatedLink link{config.emulated_bandwidth, config.emulated_latency};
    TFDIST_RETURN_IF_ERROR(CheckEmulatedLink(link));
    mpi->emulated_transport = std::make_unique<EmulatedLinkTransport>(
        *mpi->transport, topology->hosts.host_of_rank(), link);
    mpi->emulated_control_plane =
        std::make_unique<EmulatedControlPlane>(*mpi->emulated_transport, *mpi->control_plane);
    links.transport = mpi->emulated_transport.get();
    links.control_plane = mpi->emulated_control_plane.get();
  }
  NetworkCost network_cost{};
  if (inherited != nullptr) {
    network_cost = *inherited;
  } else {
    TFDIST_RETURN_IF_ERROR(CalibrateNetworkCost(*mpi->transport, *links.transport,
                                                topology->hosts, topology->machines,
                                                CalibrationSettings(config), &network_cost));
  }
  links.shared_memory.unavailable = WhyNoSharedMemory(config, machine.hosts);
  if (links.shared_memory.unavailable.empty()) {
    TFDIST_RETURN_IF_ERROR(MapSharedMemory(*mpi->control_plane, *mpi->control_plane,
                                           kSharedMemorySlotBytes, oversubscribed,
                                           &mpi->shared_memory, &links.shared_memory.unavailable));
    links.shared_memory.allreduce = mpi->shared_memory.allreduce.get();
    if (links.shared_memory.allreduce == nullptr && config.debug_log) {
      std::fprintf(stderr, "tfdist: no shared memory segment (%s); the 'shm' algorithm is off\n",
                   links.shared_memory.unavailable.c_str());
    }
  }
  if (!config.shared_memory) {
    links.shared_memory.host_unavailable = WhyNoSharedMemory(config, machine.hosts);
  } else {
    TFDIST_RETURN_IF_ERROR(MapHostSharedMemory(
        *mpi->transport, *mpi->control_plane, topology->hosts, machine.hosts, oversubscribed,
        &mpi->host_shared_memory, &links.shared_memory.host_unavailable));
    links.shared_memory.host_allreduce = mpi->host_shared_memory.allreduce.get();
    if (config.debug_log && topology->hosts.host_count() > 1 &&
        links.shared_memory.host_allreduce == nullptr) {
      std::fprintf(stderr, "tfdist: no shared memory segment per host (%s); the "
                           "'hierarchical_shm' algorithm is off\n",
                   links.shared_memory.host_unavailable.c_str());
    }
  }
  const MPI_Comm data_comm = mpi->transport->comm();
  links.reference_allreduce.reduce = [data_comm](const void* input, void* output, size_t count,
                                                 DataType dtype, ReduceOp op) {
    return MpiNativeAllreduce(data_comm, input, output, count, dtype, op);
  };
  links.reference_allreduce.reduces = MpiCanReduce;
  links.reference_allreduce.auto_may_pick = config.emulated_bandwidth <= 0;
  // Evicted (stall eviction): the process ends, by SIGKILL. Open MPI's
  // launcher takes a non-zero exit status for the job's failure and ends
  // every process, fault tolerance or not, whereas a process killed by a
  // signal is a failed process that ULFM reports to the others, and elastic
  // recovery carries on without it. SIGKILL, because nothing can catch it.
  // The reason is on stderr already (the runtime printed it).
  links.leave = [](const std::string&) {
    std::fprintf(stderr, "tfdist: this process ends itself (SIGKILL) so that the other ranks "
                         "carry on without it\n");
    std::fflush(stderr);
    std::raise(SIGKILL);
    _exit(1);  // not reached
  };
  links.owner = std::move(mpi);
  return Runtime::Start(config, std::move(links), topology->hosts, network_cost, out);
}

}  // namespace

Status CreateMpiRuntime(uintptr_t comm_handle, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out, Topology* topology) {
  return CreateMpiRuntime(reinterpret_cast<MPI_Comm>(comm_handle), config, out, topology);
}

Status CreateMpiRuntime(MPI_Comm comm, const RuntimeConfig& config,
                        std::unique_ptr<Runtime>* out, Topology* topology) {
  return CreateRuntime(comm, config, nullptr, out, topology);
}

Status CreateMpiRuntime(uintptr_t comm_handle, const RuntimeConfig& config,
                        const NetworkCost& inherited, std::unique_ptr<Runtime>* out,
                        Topology* topology) {
  return CreateRuntime(reinterpret_cast<MPI_Comm>(comm_handle), config, &inherited, out,
                       topology);
}

bool GuardExitAfterPeerFailure(double seconds, bool joined_after_failure) {
  if (!PeerFailureSeen() && !joined_after_failure) return false;
  std::thread([seconds] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::fprintf(stderr,
                 "tfdist: MPI did not finish within %.0f s of exiting after a peer failed "
                 "(MPI_Finalize waits for the dead process); this rank exits with code 1\n",
                 seconds);
    std::fflush(stderr);
    _exit(1);
  }).detach();
  return true;
}

}  // namespace tfdist
