// JoinState, DescribeStandIns and ValidateStandIns: which tensors a joined
// rank lets run, what it stands in with, and what it cannot stand in for.
#include <vector>

#include "cc/core/runtime/join_state.h"
#include "cc/core/runtime/validation.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {
namespace {

using tfdist::CollectiveType;
using tfdist::JoinState;
using tfdist::TensorDescription;

TensorDescription Described(CollectiveType type, std::vector<int64_t> shape) {
  TensorDescription d;
  d.type = type;
  d.shape = std::move(shape);
  return d;
}

}  // namespace

TFDIST_TEST(JoinedRanksCoverWhatTheyDidNotAnnounce) {
  JoinState joins(4);
  const std::vector<bool> seen_by_0_and_2 = {true, false, true, false};
  CHECK(joins.StandIns().empty());
  CHECK(!joins.Covers(seen_by_0_and_2));
  joins.Join(3);
  CHECK(!joins.Covers(seen_by_0_and_2));
  joins.Join(1);
  CHECK(joins.Covers(seen_by_0_and_2));
  CHECK((joins.StandIns(seen_by_0_and_2) == std::vector<int>{1, 3}));
  CHECK((joins.StandIns() == std::vector<int>{1, 3}));
  // A rank that announced the tensor runs it for real, joined or not.
  CHECK((joins.StandIns({true, true, true, false}) == std::vector<int>{3}));
  CHECK_EQ(joins.last_joined(), 1);
  joins.Reset();
  CHECK(!joins.has_joined(1));
  CHECK(joins.StandIns().empty());
}

TFDIST_TEST(StandInsTakeTheFirstAnnouncersDescriptionWithNoRows) {
  std::vector<TensorDescription> per_rank(3);
  per_rank[1] = Described(CollectiveType::kAllreduce, {4, 5});
  per_rank[2] = per_rank[1];
  tfdist::DescribeStandIns({0}, &per_rank);
  CHECK((per_rank[0].shape == std::vector<int64_t>{4, 5}));
  CHECK_OK(tfdist::ValidateAcrossRanks("t", per_rank));

  std::vector<TensorDescription> gathered(3);
  gathered[0] = Described(CollectiveType::kAllgather, {7, 2});
  gathered[1] = Described(CollectiveType::kAllgather, {1, 2});
  tfdist::DescribeStandIns({2}, &gathered);
  CHECK((gathered[2].shape == std::vector<int64_t>{0, 2}));
  CHECK_OK(tfdist::ValidateAcrossRanks("g", gathered));
}

TFDIST_TEST(JoinedRanksCannotBroadcastOrTakePartInAlltoall) {
  TensorDescription broadcast = Described(CollectiveType::kBroadcast, {3});
  broadcast.root = 2;
  CHECK_OK(tfdist::ValidateStandIns("b", broadcast, {}));
  CHECK_OK(tfdist::ValidateStandIns("b", broadcast, {1}));
  const tfdist::Status from_joined = tfdist::ValidateStandIns("b", broadcast, {1, 2});
  CHECK(from_joined.code() == tfdist::StatusCode::kFailedPrecondition);
  CHECK(from_joined.message().find("root rank 2") != std::string::npos);
  CHECK(from_joined.message().find("ranks 1, 2 have called tfdist.join()") != std::string::npos);
  const tfdist::Status alltoall =
      tfdist::ValidateStandIns("a", Described(CollectiveType::kAlltoall, {4}), {0});
  CHECK(alltoall.code() == tfdist::StatusCode::kFailedPrecondition);
  CHECK(alltoall.message().find("alltoall 'a'") != std::string::npos);
}

}  // namespace tfdist_test
