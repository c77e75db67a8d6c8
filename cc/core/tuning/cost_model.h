// The allreduce cost model and the selector that takes its argmin.
//
// Each algorithm is the sequence of steps its file describes, and each step
// costs what a step of its kind and size costs on the link class it uses
// (step_costs.h): measured curves at init (step_calibration.h), or the
// survey's L + nG (+ nR) when the user gives the link cost (Ben-Nun &
// Hoefler 2018, Table 4; with those curves the formulas here are theirs).
// Across hosts, every synchronised step of a flat algorithm costs the
// slower class among the messages of that step.
#ifndef TFDIST_CORE_TUNING_COST_MODEL_H_
#define TFDIST_CORE_TUNING_COST_MODEL_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "cc/core/collectives/algorithm.h"
#include "cc/core/transport/host_layout.h"
#include "cc/core/tuning/step_costs.h"

namespace tfdist {

// Predicted seconds for one allreduce of `bytes` bytes over the ranks of
// `layout`. kTree, kButterfly, kRing, kRabenseifner and kHierarchical are
// modelled; kHierarchical only on a uniform layout of several hosts (else
// +infinity, as for kAuto and kMpi). P <= 1 costs 0.
double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, const HostLayout& layout,
                               size_t bytes, const NetworkCost& network);

// The one-host form: P ranks, every step the survey's on `link`.
double PredictAllreduceSeconds(AllreduceAlgorithm algorithm, int size,
                               size_t bytes, const LinkCost& link);

// How many pipeline segments hierarchical allreduce cuts `bytes` into on
// `layout`: the argmin of its predicted time over 1 .. 64 segments of at
// least 2 MiB (cost_model.cc). 1 where there is nothing to overlap (one
// host, or one rank per host). Deterministic, like ChooseAllreduce.
int HierarchicalSegments(const HostLayout& layout, size_t bytes, const NetworkCost& network);

// The modelled-fastest of tree, butterfly, ring, Rabenseifner and
// hierarchical (not where a host has one rank: hierarchical is then the
// flat algorithm of its cross-host phase). Exact ties go to the first in the order butterfly,
// Rabenseifner, ring, tree, hierarchical (fewest messages first). P <= 1
// returns kButterfly (which then does nothing). Deterministic: equal
// arguments give the same choice on every rank.
AllreduceAlgorithm ChooseAllreduce(const HostLayout& layout, size_t bytes,
                                   const NetworkCost& network);

// Every algorithm ChooseAllreduce considers, fastest predicted first (ties
// in ChooseAllreduce's order), each with its predicted seconds: the first
// is ChooseAllreduce's pick. At P = 2 neither offers the tree (a reduce and
// a broadcast, the butterfly's one exchange as two messages in turn);
// PredictAllreduceSeconds still prices it where it is forced.
// AlgorithmChooser times the plausible ones on the first calls of a size
// class. Empty where P <= 1.
struct RankedAlgorithm {
  AllreduceAlgorithm algorithm;
  double predicted_seconds;
};
std::vector<RankedAlgorithm> RankAllreduce(const HostLayout& layout, size_t bytes,
                                           const NetworkCost& network);

// The one-host form; never picks hierarchical.
AllreduceAlgorithm ChooseAllreduce(int size, size_t bytes, const LinkCost& link);

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_COST_MODEL_H_
