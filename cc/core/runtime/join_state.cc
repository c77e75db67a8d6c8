#include "cc/core/runtime/join_state.h"

#include <algorithm>

namespace tfdist {

void JoinState::Join(int rank) {
  if (!joined_[rank]) {
    joined_[rank] = true;
    ++count_;
  }
  last_ = rank;
}

void JoinState::Reset() {
  std::fill(joined_.begin(), joined_.end(), false);
  count_ = 0;
}

bool JoinState::Covers(const std::vector<bool>& seen) const {
  for (size_t r = 0; r < joined_.size(); ++r) {
    if (!seen[r] && !joined_[r]) return false;
  }
  return true;
}

std::vector<int> JoinState::StandIns(const std::vector<bool>& seen) const {
  return JoinedExcept(&seen);
}

std::vector<int> JoinState::StandIns() const { return JoinedExcept(nullptr); }

std::vector<int> JoinState::JoinedExcept(const std::vector<bool>* seen) const {
  std::vector<int> ranks;
  for (size_t r = 0; count_ > 0 && r < joined_.size(); ++r) {
    if (joined_[r] && (seen == nullptr || !(*seen)[r])) ranks.push_back(static_cast<int>(r));
  }
  return ranks;
}

void DescribeStandIns(const std::vector<int>& stand_ins,
                      std::vector<TensorDescription>* per_rank) {
  if (stand_ins.empty()) return;
  int reference = -1;
  for (int r = 0; r < static_cast<int>(per_rank->size()) && reference < 0; ++r) {
    if (!std::binary_search(stand_ins.begin(), stand_ins.end(), r)) reference = r;
  }
  if (reference < 0) return;  // nobody announced it: nothing to stand in for
  TensorDescription stand_in = (*per_rank)[reference];
  const bool rows_differ = stand_in.type == CollectiveType::kAllgather ||
                           stand_in.type == CollectiveType::kAlltoall;
  if (rows_differ) {
    if (!stand_in.shape.empty()) stand_in.shape[0] = 0;
    std::fill(stand_in.splits.begin(), stand_in.splits.end(), 0);
  }
  for (int r : stand_ins) (*per_rank)[r] = stand_in;
}

}  // namespace tfdist
