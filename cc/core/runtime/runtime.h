// The per-process runtime: kernels enqueue requests and return; one
// background thread negotiates with the other ranks (negotiation.h), runs
// what is ready everywhere (executor.h) and completes the requests. It talks
// to the other ranks only through a Transport (the collectives' data) and a
// ControlPlane (negotiation, barriers, abort): MPI in production
// (mpi_runtime.h), threads as ranks in the unit tests.
#ifndef TFDIST_CORE_RUNTIME_RUNTIME_H_
#define TFDIST_CORE_RUNTIME_RUNTIME_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cc/core/runtime/autotune_session.h"
#include "cc/core/runtime/burst_memory.h"
#include "cc/core/runtime/config.h"
#include "cc/core/runtime/executor.h"
#include "cc/core/runtime/negotiation.h"
#include "cc/core/runtime/request.h"
#include "cc/core/runtime/stall_inspector.h"
#include "cc/core/runtime/stand_in.h"
#include "cc/core/runtime/stats.h"
#include "cc/core/runtime/timeline.h"
#include "cc/core/control/control_plane.h"
#include "cc/core/transport/transport.h"
#include "cc/core/transport/host_layout.h"

namespace tfdist {

// What a runtime talks through.
struct RuntimeLinks {
  Transport* transport = nullptr;         // the collectives' data
  ControlPlane* control_plane = nullptr;  // negotiation, barriers, abort
  ReferenceAllreduce reference_allreduce;  // the "mpi" algorithm (executor.h)
  SharedMemoryLink shared_memory;          // the "shm" algorithm (executor.h)
  std::FILE* stall_reports = stderr;      // where stall_inspector.h writes
  // What this process does when the other ranks evict it (stall eviction,
  // negotiation.h), given why: the MPI factory ends the process, which the
  // others then see as a failed process (elastic training). Null (the unit
  // tests): the runtime only stops, as if shut down.
  std::function<void(const std::string& why)> leave;
  // Holds the transport and control plane when the runtime owns them (the
  // MPI factory); null when the caller does (a test's fabric), and then they
  // must outlive the runtime. Destroyed after the background thread ended.
  std::shared_ptr<void> owner;
};

class Runtime {
 public:
  // Collective: every rank calls it with the same config. Starts the
  // background thread. The settings check (settings_agreement.h), the hosts
  // and the link costs are the caller's: they come before anything that
  // depends on them.
  static Status Start(const RuntimeConfig& config, RuntimeLinks links, const HostLayout& hosts,
                      const NetworkCost& network_cost, std::unique_ptr<Runtime>* out);
  Runtime(const RuntimeConfig& config, RuntimeLinks links, const HostLayout& hosts,
          const NetworkCost& network_cost);
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
  // requests still waiting fail with Aborted. Idempotent. `why` says, for
  // the other ranks' errors, what this rank did: a phrase that follows
  // "rank N" (kShutdownCalled when the user asked; the Python layer says
  // when its process is exiting instead).
  void Shutdown(const std::string& why = kShutdownCalled);
  static constexpr const char* kShutdownCalled = "called tfdist.shutdown()";
  // Runs one round on the calling thread if no other thread is running one;
  // returns whether it did. An eager op calls this while it waits for its
  // own result, which saves the two thread hand-offs of the background path.
  bool TryRunRoundInline();

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  const Stats& stats() const { return stats_; }
  // For counters the runtime cannot see itself: the compressors that run
  // outside it record what their calls would have sent dense.
  Stats& mutable_stats() { return stats_; }
  // The intra-host step costs summarised as the survey's L, G and R, and
  // both link classes' step costs.
  LinkCost link_cost() const { return Summarize(network_cost_.intra); }
  const NetworkCost& network_cost() const { return network_cost_; }
  // The hosts as this job sees them (virtual ones with TFDIST_VIRTUAL_HOSTS).
  const HostLayout& hosts() const { return hosts_; }
  const RuntimeConfig& config() const { return config_; }
  // Which of `candidates` (num_groups values, the traced one first) the
  // training step at `iteration` runs: an index, 0 unless autotuning chose
  // another (gradient_groups_schedule.h). Any thread.
  int AskGradientGroups(const std::vector<int32_t>& candidates, int64_t iteration);
  // As for float32 (tfdist.algorithm_for: 16-bit floats are reduced in it).
  AllreduceAlgorithm ResolveAlgorithm(AllreduceAlgorithm requested, size_t bytes) const {
    return executor_.Resolve(requested, bytes, DataType::kFloat32);
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
  // After a round in which some rank asked to stop: every rank learns from
  // every other why (their Shutdown's `why`), for the message its waiting
  // collectives fail with. Collective over the control plane.
  Status ExplainShutdown(const std::string& mine, Status* reason);
  // Reports stalls; false when the stall shutdown time passed (the job was
  // aborted, or must stop if the control plane's Abort returned). With
  // stall eviction on it asks for an eviction instead.
  bool InspectStalls();
  // What the autotuner asks of the cost model (autotuner.h TuningModel).
  TuningModel MakeTuningModel() const;
  // Switches to parameters the autotuner's broadcast brought; round_mutex_ held.
  void ApplyTuning(const TunedParameters& parameters);
  // After a round that gave an eviction verdict: leaves if this rank is
  // evicted, reports whom otherwise; aborts as before when this rank asked
  // and nobody could be blamed. False when the runtime must stop.
  bool ActOnEviction(const RoundResult& result);
  // Ends the job everywhere after a stall past the shutdown time.
  void AbortForStall();

  // Set once by the constructor, then only read (their own members say
  // how they are shared).
  RuntimeLinks links_;  // first: what it owns outlives everything below
  RuntimeConfig config_;
  Transport& transport_;
  ControlPlane& control_plane_;
  HostLayout hosts_;
  NetworkCost network_cost_;
  Stats stats_;        // written by round threads, read by anyone (stats.h)
  Timeline timeline_;  // used by round threads only, after Start opened it

  // Guarded by mutex_: the hand-over between threads that enqueue and the
  // thread that runs rounds.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Request> queue_;      // handed over, not yet announced
  std::set<std::string> names_in_flight_;
  bool join_pending_ = false;  // this rank's join() has not completed
  bool wake_requested_ = false;  // WakeBackground() was called
  std::chrono::steady_clock::time_point queue_began_;  // when queue_ last became non-empty
  std::chrono::steady_clock::time_point queue_grew_;   // the last enqueue's time
  bool shutdown_requested_ = false;
  std::string shutdown_why_;  // Shutdown's `why`, sent to the others
  bool stopped_ = false;
  Status stopped_because_;  // stop_reason_ as it was when stopped_ was set
  BurstMemory bursts_;  // the background thread's only, in WaitForWork under mutex_

  // Guarded by round_mutex_, held by whichever thread runs a round (the
  // background thread, or one finishing an eager op).
  std::mutex round_mutex_;
  Negotiator negotiator_;
  // Its collectives run under round_mutex_; Resolve (ResolveAlgorithm, from
  // any thread) reads only what the constructor set.
  CollectiveExecutor executor_;
  Status stop_reason_;  // why the runtime must stop; published in stopped_because_
  std::map<std::string, Request> announced_;
  std::map<std::string, std::chrono::steady_clock::time_point> announced_at_;
  StallInspector stall_inspector_;
  // TFDIST_AUTOTUNE (autotune_session.h); null when off. The fusion
  // threshold it may change is read by Execute under round_mutex_.
  std::unique_ptr<AutotuneSession> autotune_;
  size_t fusion_threshold_bytes_;
  bool eviction_asked_ = false;        // this rank asked; the verdict is pending
  std::vector<int> evictions_reported_;  // the last verdict this rank reported

  // Written under round_mutex_, read without it: what the background thread
  // needs to know while it waits for work.
  std::atomic<bool> finished_{false};
  std::atomic<size_t> announced_count_{0};
  std::atomic<bool> carry_over_{false};
  std::atomic<bool> standing_in_{false};  // this rank has joined
  // The cycle time (config, or the autotuner's), read by WaitForWork.
  std::atomic<double> cycle_time_ms_;

  std::thread thread_;  // set by Start, joined by Shutdown
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_RUNTIME_H_
