#ifndef TFDIST_CORE_COLLECTIVES_RABENSEIFNER_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_RABENSEIFNER_ALLREDUCE_H_

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// In-place allreduce of `count` elements of `buffer`; see rabenseifner_allreduce.cc
// for the steps and their cost. Any group size, any count (0 included).
Status RabenseifnerAllreduce(Transport& transport, void* buffer, size_t count,
                             DataType dtype, ReduceOp op);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_RABENSEIFNER_ALLREDUCE_H_
