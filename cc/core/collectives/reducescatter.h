#ifndef TFDIST_CORE_COLLECTIVES_REDUCESCATTER_H_
#define TFDIST_CORE_COLLECTIVES_REDUCESCATTER_H_

#include <cstddef>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// `buffer` holds sum(counts_per_rank) elements on every rank. Reduces them
// across ranks and leaves rank r's block (counts_per_rank[r] elements at
// element offset sum(counts_per_rank[0..r))) fully reduced in place; the
// other blocks of `buffer` are left unspecified. counts_per_rank (P entries,
// any may be zero) is the same on every rank.
Status RingReducescatter(Transport& transport, void* buffer,
                         const std::vector<size_t>& counts_per_rank,
                         DataType dtype, ReduceOp op);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_REDUCESCATTER_H_
