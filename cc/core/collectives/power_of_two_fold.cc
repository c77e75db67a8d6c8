#include "cc/core/collectives/power_of_two_fold.h"

#include "cc/core/transport/collective_tags.h"
#include "cc/core/numeric/reduction.h"

namespace tfdist {

PowerOfTwoFold::PowerOfTwoFold(int rank, int size) : rank_(rank) {
  group_size_ = 1;
  while (group_size_ * 2 <= size) group_size_ *= 2;
  extra_ranks_ = size - group_size_;
  if (rank < 2 * extra_ranks_) {
    virtual_rank_ = (rank % 2 == 1) ? rank / 2 : -1;
  } else {
    virtual_rank_ = rank - extra_ranks_;
  }
}

int PowerOfTwoFold::RealRank(int virtual_rank) const {
  return virtual_rank < extra_ranks_ ? 2 * virtual_rank + 1
                                     : virtual_rank + extra_ranks_;
}

Status PowerOfTwoFold::Fold(Transport& transport, const void* input, void* output,
                            void* scratch, size_t count, DataType dtype, ReduceOp op) const {
  if (rank_ >= 2 * extra_ranks_) return Status::OK();
  const size_t bytes = count * DataTypeSize(dtype);
  if (!participates()) {
    return transport.Send(rank_ + 1, input, bytes, kPowerOfTwoFoldTag);
  }
  TFDIST_RETURN_IF_ERROR(
      transport.Recv(rank_ - 1, scratch, bytes, kPowerOfTwoFoldTag));
  ReduceOutOfPlace(output, input, scratch, count, dtype, op);
  return Status::OK();
}

Status PowerOfTwoFold::Unfold(Transport& transport, void* buffer,
                              size_t bytes) const {
  if (rank_ >= 2 * extra_ranks_) return Status::OK();
  if (!participates()) {
    return transport.Recv(rank_ + 1, buffer, bytes, kPowerOfTwoFoldTag);
  }
  return transport.Send(rank_ - 1, buffer, bytes, kPowerOfTwoFoldTag);
}

}  // namespace tfdist
