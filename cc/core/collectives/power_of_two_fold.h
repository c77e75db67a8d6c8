// Non-power-of-two group sizes for the algorithms that pair ranks by XOR of
// their numbers (butterfly and Rabenseifner), shared by both.
//
// With P = p2 + r, p2 the largest power of two <= P, the first 2r ranks pair
// up before the power-of-two phase: even rank 2i sends its whole vector to odd
// rank 2i+1, which reduces it into its own and plays virtual rank i in the
// phase; ranks 2r..P-1 play virtual ranks r..p2-1 (rank - r). The even ranks
// sit the phase out; afterwards each odd partner sends them the result.
// This is MPICH's whole-vector fold. It costs two extra messages of the full
// vector on the critical path: 2 * (L + m*G).
#ifndef TFDIST_CORE_COLLECTIVES_POWER_OF_TWO_FOLD_H_
#define TFDIST_CORE_COLLECTIVES_POWER_OF_TWO_FOLD_H_

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

class PowerOfTwoFold {
 public:
  PowerOfTwoFold(int rank, int size);

  // p2: the number of ranks in the power-of-two phase.
  int group_size() const { return group_size_; }
  // False for the even ranks that are folded away.
  bool participates() const { return virtual_rank_ >= 0; }
  // This rank's number in the power-of-two phase; -1 if it sits out.
  int virtual_rank() const { return virtual_rank_; }
  // The real rank that plays `virtual_rank` in the power-of-two phase.
  int RealRank(int virtual_rank) const;

  // Before the power-of-two phase: even partners hand their vector over, odd
  // partners reduce it into `buffer`. `scratch` must hold `count` elements
  // (only odd partners use it).
  Status Fold(Transport& transport, void* buffer, void* scratch, size_t count,
              DataType dtype, ReduceOp op) const {
    return Fold(transport, buffer, buffer, scratch, count, dtype, op);
  }
  // Out of place: even partners send `input`; odd partners write `input`
  // reduced with their partner's vector into `output`, reading `input` once.
  // Everyone else leaves `output` untouched. `input == output` is in place.
  Status Fold(Transport& transport, const void* input, void* output, void* scratch,
              size_t count, DataType dtype, ReduceOp op) const;
  // Where this rank's vector lies after Fold(input, output): in `output` for
  // the odd partners that reduced into it, still in `input` for the others.
  const void* PhaseInput(const void* input, const void* output) const {
    return rank_ < 2 * extra_ranks_ ? output : input;
  }
  // After the phase: odd partners send the result back to the even ones.
  Status Unfold(Transport& transport, void* buffer, size_t bytes) const;

 private:
  int rank_;
  int extra_ranks_;   // r = P - p2
  int group_size_;    // p2
  int virtual_rank_;  // -1 for folded-away ranks
};

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_POWER_OF_TWO_FOLD_H_
