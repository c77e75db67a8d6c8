// The allreduce with nothing to exchange, shared by the algorithms that
// take `input`, `output` and a result scale.
#ifndef TFDIST_CORE_COLLECTIVES_WITHOUT_PEERS_H_
#define TFDIST_CORE_COLLECTIVES_WITHOUT_PEERS_H_

#include <cstddef>

#include "cc/core/base/data_type.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// True when the group has one rank or the vector no elements: the result is
// then the input times `result_scale` (ConvertScaled's rounding, as the
// algorithms apply it) and is already in `output`. A lone rank must still
// scale, or an Average would differ from what the same rank computes in a
// group.
inline bool CompletedWithoutPeers(const Transport& transport, const void* input, void* output,
                                  size_t count, DataType dtype, double result_scale) {
  if (transport.size() != 1 && count != 0) return false;
  if (count > 0 && (input != output || result_scale != 1.0)) {
    ConvertScaled(input, dtype, output, dtype, count, result_scale);
  }
  return true;
}

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_WITHOUT_PEERS_H_
