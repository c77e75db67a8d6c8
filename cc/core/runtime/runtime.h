// The per-process runtime: kernels enqueue requests and return; one
// background thread negotiates with the other ranks (negotiation.h), runs
// what is ready everywhere (executor.h) and completes the requests.
#ifndef TFDIST_CORE_RUNTIME_RUNTIME_H_
#define TFDIST_CORE_RUNTIME_RUNTIME_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/runtime/burst_memory.h"
#include "cc/core/runtime/config.h"
#include "cc/core/runtime/executor.h"
#include "cc/core/runtime/negotiation.h"
#include "cc/core/runtime/request.h"
#include "cc/core/runtime/stall_inspector.h"
#include "cc/core/runtime/stand_in.h"
#include "cc/core/runtime/stats.h"
#include "cc/core/runtime/timeline.h"
#include "cc/core/runtime/topology.h"
#include "cc/core/transport/mpi_transport.h"

namespace tfdist {

class Runtime {
 public:
  // Collective over `comm`: every rank calls it. Measures or reads the link
  // cost, then starts the background thread.
  static Status Create(MPI_Comm comm, const RuntimeConfig& config,
                       std::unique_ptr<Runtime>* out);
  // `links` (may be null: the collectives then use `transport` directly) wraps
  // `transport` with emulated inter-host links.
  Runtime(const RuntimeConfig& config, std::unique_ptr<MpiTransport> transport,
          std::unique_ptr<Transport> links, std::unique_ptr<Negotiator> negotiator,
          const Topology& topology, const NetworkCost& network_cost);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Hands a request to the background thread. Fails at once (and does not
  // call done) if the name is already in flight or the runtime stopped.
  // `wake_background` false leaves the background thread asleep: the caller
  // drives rounds itself (TryRunRoundInline) and calls WakeBackground() if
  // it stops before its request completed.
  Status Enqueue(Request request, bool wake_background = true);
  void WakeBackground();
  // Hands several requests over at once, so that they are announced in the
  // same round. All or nothing: if one name is in flight, none is enqueued.
  Status EnqueueGroup(std::vector<Request> requests, bool wake_background = true);
  // Stops the background thread after a last round with the other ranks;
  // requests still waiting fail with Aborted. Idempotent.
  void Shutdown();
  // Runs one round on the calling thread if no other thread is running one;
  // returns whether it did. An eager op calls this while it waits for its
  // own result, which saves the two thread hand-offs of the background path.
  bool TryRunRoundInline();

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  const Stats& stats() const { return stats_; }
  // The intra-host link cost, and both link classes.
  const LinkCost& link_cost() const { return network_cost_.intra; }
  const NetworkCost& network_cost() const { return network_cost_; }
  // The hosts as this job sees them (virtual ones with TFDIST_VIRTUAL_HOSTS).
  const Topology& topology() const { return topology_; }
  const RuntimeConfig& config() const { return config_; }
  AllreduceAlgorithm ResolveAlgorithm(AllreduceAlgorithm requested, size_t bytes) const {
    return executor_.Resolve(requested, bytes);
  }

 private:
  void Loop();
  // Returns when work was queued or shutdown asked for (false), or when a
  // round is due anyway (true: the cycle or idle tick passed).
  bool WaitForWork();
  // One negotiation round and the collectives it makes ready; the caller
  // holds round_mutex_. Returns false once the runtime must stop.
  bool RunRoundLocked();
  // Fails what still waits and lets the background thread exit; round_mutex_ held.
  void Finish();
  bool QueuedWorkOrShutdown();
  // Refuses a join while this rank has collectives in flight, and any
  // collective while its join waits (join_state.h); mutex_ held.
  Status CheckJoinLocked(const std::vector<Request>& requests) const;
  void Execute(const std::vector<ReadyTensor>& ready);
  void Complete(Request& request, const Status& status);
  void FailAllInFlight(const Status& status);
  void InspectStalls();

  RuntimeConfig config_;
  std::unique_ptr<MpiTransport> transport_;
  std::unique_ptr<Transport> links_;  // emulated links over transport_, or null
  std::unique_ptr<Negotiator> negotiator_;
  Topology topology_;
  NetworkCost network_cost_;
  Stats stats_;
  Timeline timeline_;
  CollectiveExecutor executor_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Request> queue_;      // handed over, not yet announced
  std::set<std::string> names_in_flight_;
  bool join_pending_ = false;  // this rank's join() has not completed
  bool wake_requested_ = false;  // WakeBackground() was called
  std::chrono::steady_clock::time_point queue_began_;  // when queue_ last became non-empty
  BurstMemory bursts_;  // used by the background thread only
  bool shutdown_requested_ = false;
  bool stopped_ = false;
  Status stop_reason_;

  // Held by whichever thread runs a round (the background thread, or one
  // finishing an eager op); guards everything below it.
  std::mutex round_mutex_;
  std::atomic<bool> finished_{false};
  // Copies of round state that the background thread reads while waiting.
  std::atomic<size_t> announced_count_{0};
  std::atomic<bool> carry_over_{false};
  std::atomic<bool> standing_in_{false};  // this rank has joined
  std::map<std::string, Request> announced_;
  std::map<std::string, std::chrono::steady_clock::time_point> announced_at_;
  StallInspector stall_inspector_;

  std::thread thread_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_RUNTIME_H_
