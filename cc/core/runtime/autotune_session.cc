#include "cc/core/runtime/autotune_session.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace tfdist {

AutotuneSession::AutotuneSession(int rank, const TunedParameters& defaults, TuningModel model,
                                 AutotuneOptions options)
    : applied_(defaults) {
  if (rank == 0) tuner_ = std::make_unique<Autotuner>(defaults, std::move(model), options);
}

Status AutotuneSession::OpenLog(const std::string& path, int rank, int size) {
  if (path.empty()) return Status::OK();
  const std::string file = size > 1 ? path + "." + std::to_string(rank) : path;
  log_.reset(std::fopen(file.c_str(), "w"));
  if (!log_) {
    return Status::InvalidArgument("TFDIST_AUTOTUNE_LOG: cannot write '" + file +
                                   "': " + std::strerror(errno));
  }
  std::fprintf(log_.get(),
               "generation,round,step,phase,fusion_threshold_bytes,cycle_time_ms,"
               "algorithm_overrides,gradient_groups,median_step_ms,steps\n");
  std::fflush(log_.get());
  return Status::OK();
}

std::vector<uint64_t> AutotuneSession::Words() const {
  TuningBroadcast b;
  if (tuner_) {
    b.generation = tuner_->generation();
    b.parameters = tuner_->proposal();
    b.phase = tuner_->phase();
    b.previous = tuner_->last_result();
    b.groups_from_iteration = schedule_.SafeIteration();
    b.step = tuner_->steps_seen();
  }
  return EncodeTuning(b);
}

bool AutotuneSession::OnRound(const std::vector<uint64_t>& broadcast, uint64_t round,
                              double now, TunedParameters* apply) {
  FollowGroups();
  TuningBroadcast b;
  if (!DecodeTuning(broadcast, &b) || b.generation == 0 || b.generation == generation_) {
    return false;
  }
  // The trial that just ended ran with what this rank applied last.
  WriteRow(generation_, round, b.step, applied_phase_, applied_, &b.previous);
  const bool regrouped = b.parameters.gradient_groups != applied_.gradient_groups;
  generation_ = b.generation;
  applied_ = b.parameters;
  applied_phase_ = b.phase;
  if (b.phase == TuningPhase::kFinal) {
    WriteRow(generation_, round, b.step, b.phase, applied_, nullptr);
  }
  if (regrouped) {
    // Every rank reads the same iteration in this same round.
    schedule_.Change(b.parameters.gradient_groups, b.groups_from_iteration);
    waiting_generation_ = b.generation;
  } else if (tuner_) {
    waiting_generation_ = 0;
    tuner_->Applied(b.generation, now);
  }
  *apply = b.parameters;
  return true;
}

void AutotuneSession::OnAllreduce(const std::string& name, size_t bytes, double now) {
  if (tuner_) tuner_->OnAllreduce(name, bytes, now);
}

int AutotuneSession::AskGradientGroups(const std::vector<int32_t>& candidates,
                                       int64_t iteration, double now) {
  schedule_.Register(candidates);
  return schedule_.Ask(iteration, now);
}

void AutotuneSession::FollowGroups() {
  if (!tuner_ || tuner_->done()) return;
  // The tuner takes candidates only before its baseline ends.
  if (!candidates_given_ && tuner_->phase() == TuningPhase::kBaseline) {
    std::vector<int32_t> candidates = schedule_.candidates();
    if (!candidates.empty()) {
      candidates.erase(candidates.begin());  // the traced grouping is the baseline's
      tuner_->SetGroupCandidates(std::move(candidates));
      candidates_given_ = true;
    }
  }
  if (waiting_generation_ != 0) {
    const double in_force_at = schedule_.last_change_in_force_at();
    if (in_force_at >= 0) {
      tuner_->Applied(waiting_generation_, in_force_at);
      waiting_generation_ = 0;
    }
  }
}

void AutotuneSession::WriteRow(uint64_t generation, uint64_t round, int step, TuningPhase phase,
                               const TunedParameters& parameters, const TrialResult* result) {
  if (!log_) return;
  std::string median;
  int steps = 0;
  if (result != nullptr && result->samples > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", result->median_seconds * 1e3);
    median = text;
    steps = result->samples;
  }
  const std::string groups = parameters.gradient_groups == kTracedGroups
                                 ? std::string("default")
                                 : std::to_string(parameters.gradient_groups);
  std::fprintf(log_.get(), "%llu,%llu,%d,%s,%llu,%.4f,%s,%s,%s,%d\n",
               static_cast<unsigned long long>(generation),
               static_cast<unsigned long long>(round), step, TuningPhaseName(phase),
               static_cast<unsigned long long>(parameters.fusion_threshold_bytes),
               parameters.cycle_time_ms, parameters.overrides.Describe().c_str(),
               groups.c_str(), median.c_str(), steps);
  std::fflush(log_.get());
}

}  // namespace tfdist
