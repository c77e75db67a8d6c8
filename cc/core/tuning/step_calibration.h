// Measures the step curves of step_costs.h on a running group: each kind of
// step at a handful of message sizes, the way the algorithms run it.
//
//  * exchange, exchange_reduce: every rank at once, each with the partner
//    at distance 2^i in its group -- within a host its host's ranks (local
//    rank l ^ 2^i), one curve per distance, as a butterfly's rounds pair
//    ranks; between hosts the ranks of its local rank, one per host (host
//    h ^ 1), one curve -- a rank without a partner at that distance waits.
//  * ring: every group at once runs a ring allreduce of one chunk per
//    member, as ring_pipeline.h runs it; the time per ring step. Up to a
//    chunk of the largest size, in at most 64 MiB.
//  * hop, hop_reduce: one pair at distance 2^i (within a host local ranks 0
//    and 2^i, between hosts rank 0 and the first rank of host 1) passes a
//    vector back and forth, receiving (and reducing) it each time, while
//    every other rank waits, as in a tree's levels; half a round trip.
//
// A reducing step sends what it reduced the step before, and a ring step
// the chunk it received or reduced, as the algorithms do (data another core
// has just written costs more to read than data at rest: a 64 KiB
// exchange-and-reduce can take several times its exchange and its
// reduction timed apart). A step's time is the slowest rank's; the
// figure, the fastest of a few tries (on a shared machine other work only
// adds time).
//
// Every rank returns the same curves (an allreduce of the times), so that
// every rank makes the same choices. Collective: every rank calls it with
// the same arguments.
#ifndef TFDIST_CORE_TUNING_STEP_CALIBRATION_H_
#define TFDIST_CORE_TUNING_STEP_CALIBRATION_H_

#include <cstddef>
#include <vector>

#include "cc/core/transport/host_layout.h"
#include "cc/core/tuning/step_costs.h"
#include "cc/core/base/status.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

// The sizes measured at init. Within a host 8 B to 64 MiB (the tensor that
// fusion makes by default): 4x steps from 1 KiB, and 4 and 8 KiB, either
// side of where Open MPI's shared memory stops sending eagerly. Partners at distances past 1 up to
// 16 MiB (step_costs.h); 128 MiB per rank at the largest size. 64 MiB is
// measured, not extrapolated: the ranks of a machine outgrow its last-level
// cache between 4 and 64 MiB, and at 16 MiB, near its size, a step cost up
// to twice per byte what it does at 64 MiB. Between hosts 8 B to 1 MiB: the links' pace is
// known by then (StepSeconds continues it), and at 1 Gb/s a larger message
// would cost tens of ms at every init.
std::vector<size_t> IntraHostCalibrationSizes();
std::vector<size_t> InterHostCalibrationSizes();

// Whether `layout` has a pair of ranks of class `link` to measure (two ranks
// on one host; two hosts).
bool HasStepPair(const HostLayout& layout, LinkClass link);

// The curves of class `link` on `layout` (transport.size() ranks), at
// `sizes` (ascending multiples of 4). The layout must have a pair of that
// class (HasStepPair). Curves are made non-decreasing in size from the top:
// a step never costs more than a larger one of its kind, whatever slowed
// every try at one size.
Status MeasureStepCosts(Transport& transport, const HostLayout& layout, LinkClass link,
                        const std::vector<size_t>& sizes, StepCosts* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_STEP_CALIBRATION_H_
