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
               "generation,round,phase,fusion_threshold_bytes,cycle_time_ms,"
               "algorithm_overrides,median_step_ms,steps\n");
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
  }
  return EncodeTuning(b);
}

bool AutotuneSession::OnRound(const std::vector<uint64_t>& broadcast, uint64_t round,
                              double now, TunedParameters* apply) {
  TuningBroadcast b;
  if (!DecodeTuning(broadcast, &b) || b.generation == 0 || b.generation == generation_) {
    return false;
  }
  // The trial that just ended ran with what this rank applied last.
  WriteRow(generation_, round, applied_phase_, applied_, &b.previous);
  generation_ = b.generation;
  applied_ = b.parameters;
  applied_phase_ = b.phase;
  if (b.phase == TuningPhase::kFinal) WriteRow(generation_, round, b.phase, applied_, nullptr);
  if (tuner_) tuner_->Applied(b.generation, now);
  *apply = b.parameters;
  return true;
}

void AutotuneSession::OnAllreduce(const std::string& name, size_t bytes, double now) {
  if (tuner_) tuner_->OnAllreduce(name, bytes, now);
}

void AutotuneSession::WriteRow(uint64_t generation, uint64_t round, TuningPhase phase,
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
  std::fprintf(log_.get(), "%llu,%llu,%s,%llu,%.4f,%s,%s,%d\n",
               static_cast<unsigned long long>(generation),
               static_cast<unsigned long long>(round), TuningPhaseName(phase),
               static_cast<unsigned long long>(parameters.fusion_threshold_bytes),
               parameters.cycle_time_ms, parameters.overrides.Describe().c_str(),
               median.c_str(), steps);
  std::fflush(log_.get());
}

}  // namespace tfdist
