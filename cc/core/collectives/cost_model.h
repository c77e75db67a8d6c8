// The survey's cost model (Ben-Nun & Hoefler 2018, Table 4) for the four
// transport allreduce algorithms, a selector that takes its argmin, and a
// ping-pong that measures the model's two machine parameters.
#ifndef TFDIST_CORE_COLLECTIVES_COST_MODEL_H_
#define TFDIST_CORE_COLLECTIVES_COST_MODEL_H_

#include <cstddef>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// L and G of the model: the time of an empty message and the time per byte,
// and R, the time to reduce one received byte into the accumulator. The
// survey's formulas are the case R = 0; on shared memory, where a byte costs
// about as much to reduce as to move, R decides between butterfly (reduces
// log2(P) whole vectors) and ring/Rabenseifner (reduce (P-1)/P of one).
struct LinkCost {
  double latency_s;
  double seconds_per_byte;
  double reduce_seconds_per_byte = 0.0;
};

// What a single-rank group reports (nothing to measure): 2 us and 10 GB/s,
// a typical fast interconnect, and no reduction cost.
constexpr LinkCost kDefaultLinkCost = {2e-6, 1e-10, 0.0};

// Predicted seconds for one allreduce of `bytes` bytes (gamma*m) over P ranks.
// kTree, kButterfly, kRing and kRabenseifner are modelled; kAuto and kMpi
// return +infinity. P <= 1 costs 0.
double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link);

// The modelled-fastest of tree, butterfly, ring and Rabenseifner. Exact ties
// go to the first in the order butterfly, Rabenseifner, ring, tree (fewest
// messages first). P <= 1 returns kButterfly (which then does nothing).
// Deterministic: equal arguments give the same choice on every rank.
AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link);

// Measures L and G by ping-pong between ranks 0 and 1 (small messages for L,
// 4 MiB messages for G; median of several round trips) and R by reducing
// 4 MiB of float32 on rank 0, then broadcasts rank 0's numbers, so that every rank returns identical values and hence makes
// identical choices. Other ranks only take part in the broadcast. Takes a
// few milliseconds on shared memory. P == 1 returns kDefaultLinkCost.
// Collective: every rank must call it.
Status MeasureLinkCost(Transport& transport, LinkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_COST_MODEL_H_
