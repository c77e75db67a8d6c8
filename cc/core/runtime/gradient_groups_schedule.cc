#include "cc/core/runtime/gradient_groups_schedule.h"

#include <algorithm>

namespace tfdist {

void GradientGroupsSchedule::Register(const std::vector<int32_t>& candidates) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (candidates_.empty()) candidates_ = candidates;
}

std::vector<int32_t> GradientGroupsSchedule::candidates() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return candidates_;
}

int GradientGroupsSchedule::Ask(int64_t iteration, double now) {
  std::lock_guard<std::mutex> lock(mutex_);
  highest_asked_ = asked_ ? std::max(highest_asked_, iteration) : iteration;
  asked_ = true;
  if (!changes_.empty() && in_force_at_ < 0 && iteration >= changes_.back().first) {
    in_force_at_ = now;
  }
  const int32_t groups = GroupsAtLocked(iteration);
  const auto it = std::find(candidates_.begin(), candidates_.end(), groups);
  return groups == kTracedGroups || it == candidates_.end()
             ? 0
             : static_cast<int>(it - candidates_.begin());
}

int64_t GradientGroupsSchedule::SafeIteration() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t safe = asked_ ? highest_asked_ + 2 : 0;
  // Never before an earlier change: the schedule's iterations only grow.
  if (!changes_.empty()) safe = std::max(safe, changes_.back().first);
  return safe;
}

void GradientGroupsSchedule::Change(int32_t groups, int64_t from_iteration) {
  std::lock_guard<std::mutex> lock(mutex_);
  changes_.emplace_back(from_iteration, groups);
  in_force_at_ = -1;
}

int32_t GradientGroupsSchedule::GroupsAt(int64_t iteration) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return GroupsAtLocked(iteration);
}

int32_t GradientGroupsSchedule::GroupsAtLocked(int64_t iteration) const {
  int32_t groups = kTracedGroups;
  for (const auto& [from, value] : changes_) {
    if (iteration >= from) groups = value;
  }
  return groups;
}

double GradientGroupsSchedule::last_change_in_force_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_force_at_;
}

}  // namespace tfdist
