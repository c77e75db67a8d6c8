#ifndef TFDIST_CORE_COLLECTIVES_ALLTOALL_H_
#define TFDIST_CORE_COLLECTIVES_ALLTOALL_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Rank r sends send_bytes[d] bytes to each rank d and receives recv_bytes[s]
// bytes from each rank s. Blocks are contiguous in rank order in both
// buffers (block d of `send` starts at sum(send_bytes[0..d))). send_bytes[d]
// on rank r must equal recv_bytes[r] on rank d. `send` and `recv` must not
// overlap.
Status PairwiseAlltoallv(Transport& transport, const void* send,
                         const std::vector<size_t>& send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_ALLTOALL_H_
