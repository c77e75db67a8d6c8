#ifndef TFDIST_CORE_COLLECTIVES_BROADCAST_H_
#define TFDIST_CORE_COLLECTIVES_BROADCAST_H_

#include <cstddef>

#include "cc/core/base/status.h"
#include "cc/core/transport/collective_tags.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// Copies `bytes` bytes of `buffer` on rank `root` into `buffer` on every rank
// along a binomial tree. Every rank passes the same bytes and root; a root
// outside [0, size) is InvalidArgument on every rank. `tag` keeps the
// control plane's broadcasts (control/) apart from the collectives'.
Status BinomialBroadcast(Transport& transport, void* buffer, size_t bytes,
                         int root, int tag = kBroadcastTag);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_BROADCAST_H_
