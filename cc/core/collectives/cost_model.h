// The survey's cost model (Ben-Nun & Hoefler 2018, Table 4) for the
// transport allreduce algorithms, extended to two link classes (within a
// host, between hosts); a selector that takes its argmin; and a ping-pong
// that measures the model's three machine parameters per link class.
#ifndef TFDIST_CORE_COLLECTIVES_COST_MODEL_H_
#define TFDIST_CORE_COLLECTIVES_COST_MODEL_H_

#include <cstddef>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/collectives/host_layout.h"
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
  // The same two per-byte costs for collectives whose buffers on one
  // machine no longer fit its last-level cache (NetworkCost::cache_bytes):
  // moving and reducing bytes from and to memory, measured on 64 MiB with
  // every rank of the machine doing the same (MeasureLinkCostUnderLoad).
  // A copy within a host then costs several times what a 4 MiB ping-pong
  // of one pair, served from cache, shows. 0: the in-cache costs.
  double memory_seconds_per_byte = 0.0;
  double memory_reduce_seconds_per_byte = 0.0;
};

// What a single-rank group reports (nothing to measure): 2 us and 10 GB/s,
// a typical fast interconnect, and no reduction cost.
constexpr LinkCost kDefaultLinkCost = {2e-6, 1e-10, 0.0};

// The two link classes of a job whose ranks span hosts. `intra` is L, G and
// R within a host; `inter` is L and G between hosts (its R is not used:
// reducing a byte costs the host's R wherever the byte came from).
struct NetworkCost {
  LinkCost intra;
  LinkCost inter;
  // The machine the ranks of a host run on (rank 0's; the real machine, so
  // with virtual hosts every virtual host). During a collective every rank
  // copies and reduces at once: where ranks outnumber cores they share them,
  // and each in-cache intra-host byte costs ranks/cores times what one pair
  // measured (the memory costs are measured with every rank busy already).
  // Buffers of ranks_per_machine * 2 * bytes (data and receive scratch)
  // beyond cache_bytes make the memory costs apply. 0 cores or cache: unknown,
  // not modelled.
  int ranks_per_machine = 1;
  int cores_per_machine = 0;
  double cache_bytes = 0.0;
};

// Both classes equal `link`: the one-host (or one-link) model.
inline NetworkCost UniformNetwork(const LinkCost& link) { return {link, link}; }

// Predicted seconds for one allreduce of `bytes` bytes (gamma*m) over the
// ranks of `layout`. Each step of a flat algorithm costs the slower link
// class among the messages sent in that step (a ring over 2x2 hosts is
// bounded by its inter-host steps). kTree, kButterfly, kRing, kRabenseifner
// and kHierarchical are modelled; kHierarchical only on a uniform layout of
// several hosts (else +infinity, as for kAuto and kMpi). P <= 1 costs 0.
double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, const HostLayout& layout,
                               size_t bytes, const NetworkCost& network);

// The one-host form: P ranks, every link `link`.
double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link);

// How many pipeline segments hierarchical allreduce cuts `bytes` into on
// `layout`: the argmin of its predicted time over 1 .. 64 segments of at
// least 2 MiB (cost_model.cc). 1 where there is nothing to overlap (one
// host, or one rank per host). Deterministic, like ChooseAllreduce.
int HierarchicalSegments(const HostLayout& layout, size_t bytes, const NetworkCost& network);

// The modelled-fastest of tree, butterfly, ring, Rabenseifner and
// hierarchical. Exact ties go to the first in the order butterfly,
// Rabenseifner, ring, tree, hierarchical (fewest messages first). P <= 1
// returns kButterfly (which then does nothing). Deterministic: equal
// arguments give the same choice on every rank.
AllreduceAlgorithm ChooseAllreduce(const HostLayout& layout, size_t bytes,
                                   const NetworkCost& network);

// The one-host form; never picks hierarchical.
AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link);

// Measures L and G by ping-pong between ranks 0 and 1 (small messages for L,
// 4 MiB messages for G; fastest of several round trips) and R by reducing
// 4 MiB of float32 on rank 0, then broadcasts rank 0's numbers, so that
// every rank returns identical values and hence makes identical choices.
// Other ranks only take part in the broadcast. Takes a few milliseconds on
// shared memory. P == 1 returns kDefaultLinkCost.
// Collective: every rank must call it.
Status MeasureLinkCost(Transport& transport, LinkCost* out);

// The same between ranks 0 and `peer` (1 <= peer < P).
Status MeasureLinkCostTo(Transport& transport, int peer, LinkCost* out);

// The intra-host costs of a machine that every rank keeps busy, as during
// a collective: all ranks at once ping-pong 64 MiB messages with a partner
// on their host (local ranks 2i and 2i+1; memory_seconds_per_byte) and
// reduce 64 MiB of float32 (memory_reduce_seconds_per_byte); rank 0's
// numbers for every rank (0 where rank 0 has no partner). About 0.3-1 s
// and 128 MiB per rank
// on shared memory: for calibration at start-up, within hosts only.
// Collective. Leaves the other fields of `out` alone.
Status MeasureLinkCostUnderLoad(Transport& transport, const HostLayout& layout,
                                LinkCost* out);

// Both link classes of `layout`: intra between rank 0 and the next rank on
// its host, inter between rank 0 and the first rank of the next host. A
// class the layout has no pair for (one rank per host; one host) copies the
// other. Collective.
Status MeasureNetworkCost(Transport& transport, const HostLayout& layout,
                          NetworkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_COST_MODEL_H_
