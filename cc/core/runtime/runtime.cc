#include "cc/core/runtime/runtime.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc/core/runtime/fusion.h"
#include "cc/core/runtime/validation.h"

namespace tfdist {

namespace {

using Clock = std::chrono::steady_clock;

// How long a burst of requests must pause before the background thread
// takes it into a round.
constexpr auto kSettle = std::chrono::microseconds(100);
// Rounds per second of a rank with nothing to do: 10, about 0.1% of a core.
constexpr double kIdleTickMs = 100.0;

// Why the runtime stops after a round in which ranks asked to: which
// ranks, and why each did (their Shutdown's `why`).
std::string ShutdownMessage(const std::vector<std::pair<int, std::string>>& stopping, int me) {
  bool me_too = false;
  for (const auto& entry : stopping) me_too = me_too || entry.first == me;
  std::string text = me_too ? "tfdist was shut down: " : "tfdist stopped because ";
  for (size_t i = 0; i < stopping.size(); ++i) {
    const int r = stopping[i].first;
    if (i > 0) text += "; ";
    text += (r == me ? "this rank (" + std::to_string(r) + ")" : "rank " + std::to_string(r)) +
            " " + stopping[i].second;
  }
  text += me_too ? ", before this collective could run"
                 : "; so this rank (" + std::to_string(me) +
                       ") stops too, and this collective could not run";
  return text + " (collectives fail until tfdist.init() is called again)";
}

uint64_t Nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

double SecondsNow() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// A failure that stops this rank's runtime, saying so.
Status StoppedBecause(const Status& failure, int me) {
  return Status(failure.code(), failure.message() + "; tfdist stopped on this rank (" +
                                    std::to_string(me) + ") because of it");
}

}  // namespace

Status Runtime::Start(const RuntimeConfig& config, RuntimeLinks links, const HostLayout& hosts,
                      const NetworkCost& network_cost, std::unique_ptr<Runtime>* out) {
  auto runtime = std::make_unique<Runtime>(config, std::move(links), hosts, network_cost);
  TFDIST_RETURN_IF_ERROR(
      runtime->timeline_.Open(config.timeline_path, runtime->rank(), runtime->size()));
  if (config.autotune) {
    TunedParameters defaults;
    defaults.fusion_threshold_bytes = config.fusion_threshold_bytes;
    defaults.cycle_time_ms = config.cycle_time_ms;
    runtime->autotune_ = std::make_unique<AutotuneSession>(runtime->rank(), defaults,
                                                           runtime->MakeTuningModel());
    TFDIST_RETURN_IF_ERROR(runtime->autotune_->OpenLog(config.autotune_log_path,
                                                       runtime->rank(), runtime->size()));
  }
  runtime->thread_ = std::thread(&Runtime::Loop, runtime.get());
  *out = std::move(runtime);
  return Status::OK();
}

Runtime::Runtime(const RuntimeConfig& config, RuntimeLinks links, const HostLayout& hosts,
                 const NetworkCost& network_cost)
    : links_(std::move(links)),
      config_(config),
      transport_(*links_.transport),
      control_plane_(*links_.control_plane),
      hosts_(hosts),
      network_cost_(network_cost),
      bursts_(kSettle),
      negotiator_(control_plane_, config_.cache_capacity, config_.autotune ? kTuningWords : 0),
      executor_(transport_, control_plane_, links_.reference_allreduce, hosts_, network_cost_,
                config_.default_algorithm, config_.auto_trials, config_.debug_log, stats_,
                timeline_, links_.shared_memory),
      stall_inspector_(config_.stall_check_seconds, config_.stall_shutdown_seconds,
                       transport_.rank(), links_.stall_reports, config_.stall_eviction),
      fusion_threshold_bytes_(config_.fusion_threshold_bytes),
      cycle_time_ms_(config_.cycle_time_ms) {}

TuningModel Runtime::MakeTuningModel() const {
  // Called once, before the background thread starts; the functions read
  // only what the constructor set.
  TuningModel model;
  const AllreduceAlgorithm forced = config_.default_algorithm;
  model.predict_seconds = [this, forced](size_t bytes) {
    AllreduceAlgorithm algorithm = forced == AllreduceAlgorithm::kAuto
                                       ? ChooseAllreduce(hosts_, bytes, network_cost_)
                                       : forced;
    double seconds = PredictAllreduceSeconds(algorithm, hosts_, bytes, network_cost_);
    // "mpi" is not modelled; the ring stands in for its cost.
    if (!std::isfinite(seconds)) {
      seconds = PredictAllreduceSeconds(AllreduceAlgorithm::kRing, hosts_, bytes, network_cost_);
    }
    return seconds;
  };
  if (forced == AllreduceAlgorithm::kAuto) {
    model.ranked_algorithms = [this](size_t bytes) {
      std::vector<std::pair<double, AllreduceAlgorithm>> costs;
      for (AllreduceAlgorithm a : {AllreduceAlgorithm::kButterfly, AllreduceAlgorithm::kRabenseifner,
                                   AllreduceAlgorithm::kRing, AllreduceAlgorithm::kTree,
                                   AllreduceAlgorithm::kHierarchical}) {
        const double seconds = PredictAllreduceSeconds(a, hosts_, bytes, network_cost_);
        if (std::isfinite(seconds)) costs.emplace_back(seconds, a);
      }
      std::stable_sort(costs.begin(), costs.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      std::vector<AllreduceAlgorithm> ranked;
      for (const auto& entry : costs) ranked.push_back(entry.second);
      return ranked;
    };
  }
  return model;
}

void Runtime::ApplyTuning(const TunedParameters& parameters) {
  fusion_threshold_bytes_ = static_cast<size_t>(parameters.fusion_threshold_bytes);
  cycle_time_ms_.store(parameters.cycle_time_ms, std::memory_order_relaxed);
  executor_.SetAlgorithmOverrides(parameters.overrides);
}

int Runtime::AskGradientGroups(const std::vector<int32_t>& candidates, int64_t iteration) {
  if (!autotune_) return 0;
  return autotune_->AskGradientGroups(candidates, iteration, SecondsNow());
}

Runtime::~Runtime() {
  if (control_plane_.closed() && thread_.joinable()) {
    // MPI is gone (the process is exiting without shutdown()): the thread can
    // no longer talk to anyone, and joining it could wait forever.
    thread_.detach();
    return;
  }
  Shutdown();
}

Status Runtime::Enqueue(Request request, bool wake_background) {
  std::vector<Request> one;
  one.push_back(std::move(request));
  return EnqueueGroup(std::move(one), wake_background);
}

void Runtime::WakeBackground() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_requested_ = true;
  }
  wake_.notify_one();
}

Status Runtime::EnqueueGroup(std::vector<Request> requests, bool wake_background) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_ || shutdown_requested_) {
      return Status::FailedPrecondition(
          stopped_because_.ok()
              ? "tfdist has been shut down; call tfdist.init() again before using collectives"
              : "tfdist has stopped on this rank, and no collective can run until "
                "tfdist.init() is called again; it stopped because: " +
                    stopped_because_.message());
    }
    TFDIST_RETURN_IF_ERROR(CheckJoinLocked(requests));
    for (size_t i = 0; i < requests.size(); ++i) {
      if (names_in_flight_.insert(requests[i].name).second) continue;
      for (size_t j = 0; j < i; ++j) names_in_flight_.erase(requests[j].name);
      return Status::InvalidArgument(
          "tfdist: a collective named '" + requests[i].name +
          "' is already in flight on this rank; give concurrent collectives distinct names");
    }
    queue_grew_ = Clock::now();
    if (queue_.empty()) queue_began_ = queue_grew_;
    for (Request& request : requests) {
      if (request.description.type == CollectiveType::kJoin) join_pending_ = true;
      queue_.push_back(std::move(request));
    }
  }
  if (wake_background) wake_.notify_one();
  return Status::OK();
}

Status Runtime::CheckJoinLocked(const std::vector<Request>& requests) const {
  for (const Request& request : requests) {
    if (join_pending_) {
      return Status::FailedPrecondition(
          "tfdist: collective '" + request.name + "' was started on a rank that is waiting "
          "in tfdist.join(); no collective can start on it until every rank has joined");
    }
    if (request.description.type == CollectiveType::kJoin && !names_in_flight_.empty()) {
      return Status::FailedPrecondition(
          "tfdist.join() was called while collective '" + *names_in_flight_.begin() +
          "' is still in flight on this rank; wait for this rank's collectives first");
    }
  }
  return Status::OK();
}

void Runtime::Shutdown(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!shutdown_requested_) shutdown_why_ = why.empty() ? kShutdownCalled : why;
    shutdown_requested_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    thread_.join();
  }
}

void Runtime::Loop() {
  // A name that `top -H`, /proc/<pid>/task and profilers show.
  pthread_setname_np(pthread_self(), "tfdist_runtime");
  while (true) {
    const bool round_due = WaitForWork();
    std::lock_guard<std::mutex> round(round_mutex_);
    if (finished_) return;
    // A thread finishing an eager op may have run the round already.
    if (!round_due && !negotiator_.has_carry_over() && !QueuedWorkOrShutdown()) {
      continue;
    }
    if (!RunRoundLocked()) {
      Finish();
      return;
    }
  }
}

bool Runtime::TryRunRoundInline() {
  std::unique_lock<std::mutex> round(round_mutex_, std::try_to_lock);
  if (!round.owns_lock() || finished_) return false;
  if (!RunRoundLocked()) Finish();
  return true;
}

bool Runtime::QueuedWorkOrShutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !queue_.empty() || shutdown_requested_;
}

void Runtime::Finish() {
  finished_ = true;
  FailAllInFlight(stop_reason_.ok() ? Status::Aborted("tfdist was shut down") : stop_reason_);
  timeline_.Close();
  wake_.notify_all();  // the background thread may be waiting for work
}

bool Runtime::WaitForWork() {
  // A rank that has joined goes round again at once: the others' rounds,
  // which it stands in for, must not wait for its cycle.
  if (carry_over_.load(std::memory_order_acquire) ||
      standing_in_.load(std::memory_order_acquire)) {
    return true;
  }
  // Sleep until woken (eager ops drive rounds themselves and only wake this
  // thread when they give up waiting). With nothing of its own waiting, a
  // rank still takes part in a round now and then (kIdleTickMs), so that the
  // others' rounds complete, which stall reports and shutdown need; with work
  // waiting it goes round every cycle time, the longest a ready tensor waits
  // for the next round.
  const bool have_work = announced_count_.load(std::memory_order_relaxed) > 0;
  const double cycle_time_ms = cycle_time_ms_.load(std::memory_order_relaxed);
  const auto wait = std::chrono::duration<double, std::milli>(
      have_work ? cycle_time_ms : std::max(cycle_time_ms, kIdleTickMs));
  std::unique_lock<std::mutex> lock(mutex_);
  const bool woken = wake_.wait_for(lock, wait, [&] {
    return !queue_.empty() || shutdown_requested_ || finished_.load() || wake_requested_;
  });
  // An eager op that gave up driving rounds itself hands its request, which
  // it already announced, to this thread: a round is due now, not at the
  // idle tick (which cost up to 100 ms when the other rank came late).
  const bool handed_over = std::exchange(wake_requested_, false) && queue_.empty();
  if (!woken || handed_over) return true;  // a round is due whatever the queue holds
  if (shutdown_requested_ || queue_.empty()) return false;
  // A graph hands over its collectives one kernel at a time, a few µs apart.
  // Let such a burst finish arriving, so that it is negotiated and fused in
  // one round rather than split into a big round and a late one that every
  // rank must wait for: until it is as large as it was last time
  // (burst_memory.h), or no new request came for kSettle; at most one cycle.
  const std::string first = queue_.front().name;
  const size_t expected = bursts_.Expected(first);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(wait);
  size_t seen = queue_.size();
  while ((expected == 0 || seen < expected) && Clock::now() < deadline) {
    const auto settle_until = std::min(deadline, Clock::now() + kSettle);
    const bool grew = wake_.wait_until(lock, settle_until, [&] {
      return queue_.size() > seen || shutdown_requested_;
    });
    if (!grew || shutdown_requested_) break;
    seen = queue_.size();
  }
  bursts_.Taken(first, queue_.size(), queue_began_, Clock::now());
  return false;
}

bool Runtime::RunRoundLocked() {
  std::vector<Request> fresh;
  bool want_shutdown = false;
  std::string shutdown_why;
  Clock::time_point queue_began;
  Clock::time_point queue_grew;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fresh.swap(queue_);
    queue_began = queue_began_;
    queue_grew = queue_grew_;
    want_shutdown = shutdown_requested_;
    if (want_shutdown) shutdown_why = shutdown_why_;
  }
  std::vector<Announcement> announcements;
  announcements.reserve(fresh.size());
  const auto now = Clock::now();
  if (!fresh.empty()) {
    stats_.arrival_ns += Nanoseconds(queue_grew - queue_began);
    stats_.pickup_ns += Nanoseconds(now - queue_grew);
  }
  for (Request& request : fresh) {
    announcements.push_back(Announcement{request.name, request.description});
    announced_at_[request.name] = now;
    std::string name = request.name;
    announced_.emplace(std::move(name), std::move(request));
  }
  announced_count_.store(announced_.size(), std::memory_order_relaxed);

  const int64_t start = timeline_.NowMicros();
  RoundResult result;
  // A round with nothing of this rank's own in it (an idle tick) waits for
  // the other ranks' idle ticks, up to kIdleTickMs: it must not teach the
  // polling budget that waits for work are long. A joined rank's rounds
  // learn on their own budget (wait_kind.h): polling only briefly, they made
  // the others' back-to-back eager 4-byte allreduces an order of magnitude
  // slower in about half the runs (benchmarks/join.py).
  const WaitKind wait = negotiator_.has_joined() ? WaitKind::kStandIn
                        : announced_.empty()     ? WaitKind::kIdle
                                                 : WaitKind::kRendezvous;
  if (autotune_ && rank() == 0) negotiator_.SetBroadcast(autotune_->Words());
  const bool own_work = !fresh.empty() || !announced_.empty();
  Status status = negotiator_.Round(std::move(announcements), want_shutdown, wait, &result);
  const auto negotiated = Clock::now();
  if (own_work) stats_.negotiation_ns += Nanoseconds(negotiated - now);
  if (timeline_.enabled() && !result.ready.empty()) {
    for (const ReadyTensor& tensor : result.ready) {
      timeline_.Complete(tensor.name, "NEGOTIATE", start, 1, 0, "");
    }
  }
  Status shutdown_reason;
  if (status.ok() && result.shutdown) status = ExplainShutdown(shutdown_why, &shutdown_reason);
  if (!status.ok()) {
    stop_reason_ = StoppedBecause(status, rank());
    return false;
  }
  stats_.negotiation_rounds++;
  if (autotune_) {
    // Every rank reads the same words in this same round, so every rank
    // runs this round's tensors with the same parameters.
    TunedParameters tuned;
    if (autotune_->OnRound(result.broadcast, stats_.negotiation_rounds.load(), SecondsNow(),
                           &tuned)) {
      ApplyTuning(tuned);
    }
  }
  carry_over_.store(negotiator_.has_carry_over(), std::memory_order_release);
  standing_in_.store(negotiator_.has_joined(), std::memory_order_release);
  stats_.cached_rounds = negotiator_.cached_rounds();
  if (!result.ready.empty()) {
    const uint64_t completion_before = stats_.completion_ns.load(std::memory_order_relaxed);
    Execute(result.ready);
    const uint64_t executed = Nanoseconds(Clock::now() - negotiated);
    const uint64_t completing = stats_.completion_ns.load(std::memory_order_relaxed) -
                                completion_before;
    stats_.collectives_ns += executed > completing ? executed - completing : 0;
  }
  if (!stop_reason_.ok()) return false;
  if (result.shutdown) {
    stop_reason_ = shutdown_reason;
    return false;
  }
  if (result.eviction_decided && !ActOnEviction(result)) return false;
  return InspectStalls();
}

void Runtime::Execute(const std::vector<ReadyTensor>& ready) {
  std::vector<Request*> requests;
  std::vector<const ReadyTensor*> tensors;
  // What this rank runs for tensors it stands in for (join_state.h); held
  // by pointer so that `requests` stays valid as it grows.
  std::vector<std::unique_ptr<StandIn>> stand_ins;
  // Grouped ops some rank rejected, with why (Negotiator::Withdraw).
  std::vector<std::pair<std::string, Status>> rejected_groups;
  for (const ReadyTensor& tensor : ready) {
    const bool standing_in = std::find(tensor.stand_ins.begin(), tensor.stand_ins.end(),
                                       rank()) != tensor.stand_ins.end();
    Request* request = nullptr;
    if (standing_in) {
      stand_ins.push_back(std::make_unique<StandIn>(tensor.name, tensor.per_rank[rank()]));
      request = &stand_ins.back()->request;
    } else {
      auto it = announced_.find(tensor.name);
      if (it == announced_.end()) {
        stop_reason_ = Status::Internal("tfdist: negotiated tensor '" + tensor.name +
                                        "' is unknown on this rank");
        return;
      }
      request = &it->second;
    }
    if (timeline_.enabled() && !standing_in) {
      const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(
          Clock::now() - announced_at_[tensor.name]);
      timeline_.Complete(tensor.name, "WAIT_FOR_OTHER_RANKS",
                         timeline_.NowMicros() - waited.count(), 1, 0, "");
    }
    Status valid = ValidateAcrossRanks(tensor.name, tensor.per_rank);
    if (valid.ok()) valid = ValidateStandIns(tensor.name, tensor.per_rank[0], tensor.stand_ins);
    if (!valid.ok()) {
      Complete(*request, valid);
      const bool grouped = std::any_of(tensor.per_rank.begin(), tensor.per_rank.end(),
                                       [](const TensorDescription& d) { return d.group_size; });
      if (grouped) rejected_groups.emplace_back(tensor.name.substr(0, tensor.name.rfind('.')), valid);
      continue;
    }
    requests.push_back(request);
    tensors.push_back(&tensor);
  }
  for (const auto& [group, why] : rejected_groups) {
    for (const std::string& name : negotiator_.Withdraw(group)) {
      auto it = announced_.find(name);
      if (it != announced_.end()) Complete(it->second, why);
    }
  }

  std::vector<const TensorDescription*> descriptions;
  for (const Request* r : requests) descriptions.push_back(&r->description);
  for (const std::vector<size_t>& group : PlanFusion(descriptions, fusion_threshold_bytes_)) {
    Request& first = *requests[group[0]];
    const ReadyTensor& tensor = *tensors[group[0]];
    Status status;
    switch (first.description.type) {
      case CollectiveType::kAllreduce: {
        std::vector<Request*> members;
        for (size_t i : group) members.push_back(requests[i]);
        status = executor_.Allreduce(members);
        break;
      }
      case CollectiveType::kAllgather:
        if (group.size() == 1) {
          status = executor_.Allgather(first, tensor.per_rank);
        } else {
          std::vector<Request*> members;
          std::vector<const std::vector<TensorDescription>*> per_rank;
          for (size_t i : group) {
            members.push_back(requests[i]);
            per_rank.push_back(&tensors[i]->per_rank);
          }
          status = executor_.GroupedAllgather(members, per_rank);
        }
        break;
      case CollectiveType::kBroadcast: status = executor_.Broadcast(first); break;
      case CollectiveType::kAlltoall: status = executor_.Alltoall(first, tensor.per_rank); break;
      case CollectiveType::kReducescatter:
        if (group.size() == 1) {
          status = executor_.Reducescatter(first);
        } else {
          std::vector<Request*> members;
          for (size_t i : group) members.push_back(requests[i]);
          status = executor_.GroupedReducescatter(members);
        }
        break;
      case CollectiveType::kBarrier: status = executor_.Barrier(); break;
      case CollectiveType::kJoin: status = executor_.Join(first, tensor.last_joined); break;
    }
    if (autotune_ && status.ok() && first.description.type == CollectiveType::kAllreduce) {
      const double now = SecondsNow();
      for (size_t i : group) {
        if (!requests[i]->stand_in) {
          autotune_->OnAllreduce(requests[i]->name, AccumulationBytes(requests[i]->description),
                                 now);
        }
      }
    }
    for (size_t i : group) Complete(*requests[i], status);
    // A failed transfer leaves the ranks out of step: nothing later can be
    // trusted, so the runtime stops and every waiting op gets the error.
    if (status.code() == StatusCode::kInternal) {
      stop_reason_ = StoppedBecause(
          Status(status.code(), "tfdist: " + std::string(CollectiveTypeName(first.description.type)) +
                                    " '" + first.name + "' failed: " + status.message()),
          rank());
      return;
    }
  }
}

void Runtime::Complete(Request& request, const Status& status) {
  if (!status.ok()) stats_.errors++;
  if (request.stand_in) return;  // this rank never submitted it: nobody waits for it here
  const std::string name = request.name;
  const bool join = request.description.type == CollectiveType::kJoin;
  auto done = std::move(request.done);
  announced_.erase(name);
  announced_at_.erase(name);
  announced_count_.store(announced_.size(), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    names_in_flight_.erase(name);
    if (join) join_pending_ = false;
  }
  if (!done) return;
  const auto start = Clock::now();
  done(status);
  stats_.completion_ns += Nanoseconds(Clock::now() - start);
}

Status Runtime::ExplainShutdown(const std::string& mine, Status* reason) {
  // Only in the rare round that stops the job: one more allgather of a
  // few words is nothing against the user's message being true.
  std::vector<std::vector<uint8_t>> per_rank;
  TFDIST_RETURN_IF_ERROR(control_plane_.Allgatherv(
      std::vector<uint8_t>(mine.begin(), mine.end()), WaitKind::kIdle, &per_rank));
  std::vector<std::pair<int, std::string>> stopping;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (!per_rank[r].empty()) {
      stopping.emplace_back(static_cast<int>(r),
                            std::string(per_rank[r].begin(), per_rank[r].end()));
    }
  }
  *reason = Status::Aborted(ShutdownMessage(stopping, rank()));
  return Status::OK();
}

void Runtime::FailAllInFlight(const Status& status) {
  std::vector<Request> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    stopped_because_ = stop_reason_;
    queued.swap(queue_);
    names_in_flight_.clear();
    join_pending_ = false;
  }
  for (Request& r : queued) {
    if (r.done) r.done(status);
  }
  for (auto& [name, r] : announced_) {
    (void)name;
    if (r.done) r.done(status);
  }
  announced_.clear();
  announced_at_.clear();
  announced_count_.store(0, std::memory_order_relaxed);
}

bool Runtime::InspectStalls() {
  const auto now = Clock::now();
  if (!stall_inspector_.LookDue(now)) return true;
  std::vector<StallInspector::Waiting> waiting;
  for (const auto& [name, since] : announced_at_) {
    auto it = announced_.find(name);
    const bool join =
        it != announced_.end() && it->second.description.type == CollectiveType::kJoin;
    waiting.push_back(StallInspector::Waiting{name, since, join});
  }
  const bool abort = stall_inspector_.Inspect(waiting, now, [this] {
    // The table names the missing ranks only for tensors announced in full.
    negotiator_.AnnounceCachedInFull();
    std::map<std::string, std::vector<int>> missing;
    for (const WaitingTensor& w : negotiator_.Waiting()) missing[w.name] = w.missing_ranks;
    return missing;
  });
  if (!abort) return true;
  if (config_.stall_eviction) {
    negotiator_.RequestEviction();
    eviction_asked_ = true;
    return true;
  }
  AbortForStall();
  return false;
}

void Runtime::AbortForStall() {
  stop_reason_ = Status::Aborted(
      "tfdist: a collective waited longer than TFDIST_STALL_SHUTDOWN_TIME for the other "
      "ranks; the job was aborted");
  control_plane_.Abort(stop_reason_.message());
}

bool Runtime::ActOnEviction(const RoundResult& result) {
  const bool asked = std::exchange(eviction_asked_, false);
  const std::vector<int>& evicted = result.evicted;
  if (std::find(evicted.begin(), evicted.end(), rank()) != evicted.end()) {
    stop_reason_ = Status::Aborted(
        "tfdist (rank " + std::to_string(rank()) + "): evicted by the other ranks: they " +
        "waited longer than TFDIST_STALL_SHUTDOWN_TIME for collective '" +
        result.evicted_from + "', which this rank had not submitted (it was stuck outside " +
        "tfdist, or too slow)");
    std::fprintf(links_.stall_reports, "%s\n", stop_reason_.message().c_str());
    std::fflush(links_.stall_reports);
    if (links_.leave) links_.leave(stop_reason_.message());
    return false;
  }
  if (!evicted.empty()) {
    if (evicted != evictions_reported_) {
      evictions_reported_ = evicted;
      std::fprintf(links_.stall_reports,
                   "tfdist (rank %d): %s %s kept '%s' waiting past "
                   "TFDIST_STALL_SHUTDOWN_TIME and %s evicted; the other ranks carry on "
                   "without %s once elastic training sees %s exit\n",
                   rank(), evicted.size() == 1 ? "rank" : "ranks", RankList(evicted).c_str(),
                   result.evicted_from.c_str(), evicted.size() == 1 ? "is" : "are",
                   evicted.size() == 1 ? "it" : "them", evicted.size() == 1 ? "it" : "them");
      std::fflush(links_.stall_reports);
    }
    return true;
  }
  if (!asked) return true;
  // Every rank that waits also holds up another (ranks waiting on different
  // collectives): a mismatch, not a stuck rank. The job ends as it would
  // without eviction.
  std::fprintf(links_.stall_reports,
               "tfdist (rank %d): no rank can be evicted: every rank that keeps a collective "
               "waiting waits on one of its own (the ranks submitted different collectives); "
               "aborting the job\n",
               rank());
  std::fflush(links_.stall_reports);
  AbortForStall();
  return false;
}

}  // namespace tfdist
