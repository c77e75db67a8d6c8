// The reduce half of tree allreduce. (The control plane's AND used to share
// it; it now exchanges by recursive doubling, one latency per round at P=2.)
//
// In round k (k = 0, 1, ...), a rank whose lowest set bit is 2^k sends its
// partial result to rank - 2^k and is done; a rank with bit k clear receives
// from rank + 2^k (if that rank exists) into `incoming` and calls
// `combine()`, which folds `incoming` into `buffer`. After ceil(log2 P)
// rounds rank 0 holds the result.
#ifndef TFDIST_CORE_COLLECTIVES_BINOMIAL_REDUCE_H_
#define TFDIST_CORE_COLLECTIVES_BINOMIAL_REDUCE_H_

#include <cstddef>

#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Out of place: a rank sends `input` until it first receives; its first
// `combine(current, last)` must write `current` (op) `incoming` into
// `output`, and `current` is `output` from then on (`last`: the combination
// that completes the result, rank 0's final one), so the input is read where it lies and
// never copied into the output as a pass of its own. Ranks that never
// receive leave `output` untouched. `input == output` is in place.
// `incoming` holds `bytes` bytes. A template, so that the reduction inlines
// into the loop as it did before the two callers shared it.
template <typename Combine>
Status BinomialReduceToRankZero(Transport& transport, const void* input, void* output,
                                void* incoming, size_t bytes, int tag, Combine&& combine) {
  const int size = transport.size();
  const int rank = transport.rank();
  const void* current = input;
  for (int mask = 1; mask < size; mask <<= 1) {
    if (rank & mask) return transport.Send(rank - mask, current, bytes, tag);
    if (rank + mask < size) {
      TFDIST_RETURN_IF_ERROR(transport.Recv(rank + mask, incoming, bytes, tag));
      combine(current, (mask << 1) >= size);
      current = output;
    }
  }
  return Status::OK();
}

// In place: `combine()` folds `incoming` into `buffer`.
template <typename Combine>
Status BinomialReduceToRankZero(Transport& transport, void* buffer, void* incoming,
                                size_t bytes, int tag, Combine&& combine) {
  return BinomialReduceToRankZero(transport, buffer, buffer, incoming, bytes, tag,
                                  [&](const void*, bool) { combine(); });
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_BINOMIAL_REDUCE_H_
