#ifndef TFDIST_CORE_COLLECTIVES_ALLGATHER_H_
#define TFDIST_CORE_COLLECTIVES_ALLGATHER_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Every rank contributes `send_bytes` bytes (== bytes_per_rank[rank]); rank
// r's block lands at offset sum(bytes_per_rank[0..r)) of `recv` on every
// rank. Blocks may differ in size or be empty; bytes_per_rank (P entries) is
// the same on every rank. `send` may be `recv` + this rank's offset (in
// place); otherwise the two must not overlap.
Status RingAllgatherv(Transport& transport, const void* send, size_t send_bytes,
                      void* recv, const std::vector<size_t>& bytes_per_rank);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_ALLGATHER_H_
