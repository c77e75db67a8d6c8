// Which ranks have joined (tfdist.join): a rank that ran out of data calls
// join() and, until every rank has, stands in for the collectives that the
// others still run (the runtime contract: docs/design.md, docs/runtime.md).
//
// Every rank keeps an identical JoinState: it changes only through the
// announcements that every rank reads, in the same order, in negotiation.
// A joined rank has nothing of its own in flight (the runtime refuses a join
// while it has), so a tensor is ready once every rank either announced it or
// has joined.
#ifndef TFDIST_CORE_RUNTIME_JOIN_STATE_H_
#define TFDIST_CORE_RUNTIME_JOIN_STATE_H_

#include <vector>

#include "cc/core/runtime/request.h"

namespace tfdist {

class JoinState {
 public:
  explicit JoinState(int size = 1) : joined_(size, false) {}

  // `rank`'s join announcement was read.
  void Join(int rank);
  bool has_joined(int rank) const { return joined_[rank]; }
  // The rank whose join was read last (of several in one round, the
  // highest): what join() returns. -1 before any join.
  int last_joined() const { return last_; }
  // Every rank joined: the join completes and the state starts over.
  void Reset();

  // True when every rank has announced the tensor (`seen`) or joined.
  bool Covers(const std::vector<bool>& seen) const;
  // The joined ranks among those that did not announce the tensor, in rank
  // order: the ranks that stand in for it.
  std::vector<int> StandIns(const std::vector<bool>& seen) const;
  // All joined ranks: the stand-ins of a tensor no joined rank announced.
  std::vector<int> StandIns() const;

 private:
  // Joined ranks, in rank order, except those `seen` marks (none if null).
  std::vector<int> JoinedExcept(const std::vector<bool>* seen) const;

  std::vector<bool> joined_;
  int count_ = 0;
  int last_ = -1;
};

// Gives each rank in `stand_ins` the description it stands in with: the
// first announcing rank's, with no rows for allgather and alltoall (a
// joined rank adds nothing). Validation and execution then treat it like
// any other rank's.
void DescribeStandIns(const std::vector<int>& stand_ins,
                      std::vector<TensorDescription>* per_rank);

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_JOIN_STATE_H_
