// What the cost model (cost_model.h) builds its predictions from: the time of
// one step of each kind the allreduce algorithms are made of, as a function
// of the step's message size (cost_curve.h), for each of the two link
// classes (within a host, between hosts).
//
// A step is measured the way the algorithms run it (step_calibration.h):
// the synchronised kinds with every rank of the job doing the same step at
// once, so that the cores and the memory bandwidth they share, the
// scheduling of more ranks than cores, and the emulated links' late
// wake-ups are in the figure, not in multipliers added to an idle pair's
// numbers; the chained kinds as one message at a time passed from rank to
// rank, each to a rank that was waiting, as a tree's levels are.
#ifndef TFDIST_CORE_TUNING_STEP_COSTS_H_
#define TFDIST_CORE_TUNING_STEP_COSTS_H_

#include <array>
#include <vector>

#include "cc/core/tuning/cost_curve.h"

namespace tfdist {

// The kinds of step, by the algorithm steps that are made of them.
enum class StepKind : int {
  // One message passed on to a rank that was waiting for it (tree levels,
  // the broadcast's, a fold's result going back).
  kHop = 0,
  // The same, reduced into the receiver's vector before it is passed on
  // (the tree's reduce levels, a fold into the partner).
  kHopReduce,
  // Every rank exchanges a whole vector with a partner at once (a
  // Rabenseifner allgather round).
  kExchange,
  // ... and reduces what it received into its own (a butterfly round, a
  // Rabenseifner halving round).
  kExchangeReduce,
  // A step of a ring allreduce: every rank sends a chunk to its right and
  // receives one from its left, in segments of at most 1 MiB, pipelined,
  // reducing each received segment while the next arrives in the
  // reduce-scatter half, and the reduce-scatter's segments going on into the
  // allgather as soon as they are reduced (ring_pipeline.h). Hierarchical's
  // reduce-scatter and allgather within a host are its two halves.
  kRing,
};
constexpr int kStepKinds = 5;

// "hop", "hop_reduce", "exchange", "exchange_reduce", "ring"; nullptr past
// the last.
const char* StepKindName(int kind);

// The survey's three numbers for one link (Ben-Nun & Hoefler 2018): L, the
// time of an empty message; G, the time per byte on the wire; R, the time
// to reduce one received byte into the accumulator. What a user may give
// instead of a measurement, and what a measurement is summarised as.
struct LinkCost {
  double latency_s;
  double seconds_per_byte;
  double reduce_seconds_per_byte = 0.0;
};

// What a single-rank group reports (nothing to measure): 2 us and 10 GB/s,
// a typical fast interconnect, and no reduction cost.
constexpr LinkCost kDefaultLinkCost = {2e-6, 1e-10, 0.0};

// One link class: for each step kind, a curve per distance between the
// partners, because which ranks share a core (or its caches) decides what a
// pair's step costs on a machine with more ranks than cores, and every
// algorithm step pairs ranks at one distance. Distance d (index
// log2(d)) is between positions in the pair's group: local ranks within a
// host, host numbers between hosts. A pair of ranks 0 and 1 that shares a
// core exchanges 256 KiB in 1/3 of the time ranks 0 and 2 on different
// cores take, and which pairs share one is the scheduler's choice at each
// job's start. A ring step has one curve (a ring's neighbours are fixed).
// A distance past the measured ones costs what the farthest measured does.
struct StepCosts {
  std::array<std::vector<CostCurve>, kStepKinds> curves;

  const CostCurve& of(StepKind kind, int distance_index = 0) const;
  // Seconds of a step of `kind` of `bytes` at `distance_index`. Past a far
  // distance's last point, where distance 1's curve goes on, the far one
  // follows it (its last point plus distance 1's growth since): both are
  // measured up to a size where sharing a core stops mattering.
  double Seconds(StepKind kind, int distance_index, double bytes) const;
  // The curve of `kind` at `distance_index`, added (with empty ones
  // before it) if missing.
  CostCurve& at(StepKind kind, int distance_index = 0);
  // Every kind has a curve, and every curve has points and is valid.
  bool Valid() const;

  // The survey's model, step by step: a hop and an exchange cost L + nG, a
  // reduction adds nR; a ring step sends its chunk pipelined, so reducing
  // adds only what it is slower than the wire, n*max(0, R - G), in half of
  // the steps. With these curves every formula of cost_model.cc is the
  // survey's (plus R).
  static StepCosts FromLinkCost(const LinkCost& link);
};

// The index of distance `distance` >= 1: floor(log2(distance)).
int DistanceIndex(int distance);

// L, G and R of a measured class, for whoever reasons with three numbers
// (tfdist.link_cost(), the top-k compressor's sparse-or-dense choice): L the
// smallest hop, G the hop's seconds per byte from 1 to 4 MiB, R what
// reducing adds per byte to a hop there.
LinkCost Summarize(const StepCosts& costs);

// How many times slower `reference` prices the steps that `sample` measured:
// the median, over every point of every curve of `sample`, of what
// `reference` says that step costs (same kind, distance and size) over what
// `sample` measured. 1 if `sample` has no points. The median, so that one
// point caught by a slow moment does not decide.
double MedianSlowdown(const StepCosts& reference, const StepCosts& sample);

enum class LinkClass { kIntraHost, kInterHost };

// Both link classes of a job. On one host both are the same.
struct NetworkCost {
  StepCosts intra;
  StepCosts inter;
};

inline NetworkCost UniformNetwork(const StepCosts& costs) { return {costs, costs}; }
inline NetworkCost UniformNetwork(const LinkCost& link) {
  return UniformNetwork(StepCosts::FromLinkCost(link));
}
// Given by hand: `inter`'s reduction cost is `intra`'s (reducing a byte
// costs the host's time wherever the byte came from).
NetworkCost LinearNetwork(const LinkCost& intra, const LinkCost& inter);

// Seconds of one step of `kind` moving `bytes` per rank on `link`, between
// partners at `distance_index`.
//
// Between hosts the curves are measured up to 1 MiB only (at 1 Gb/s a larger
// message takes tens of ms, at every init). Beyond that, a link moves bytes
// at its last measured pace, and the step costs what the last two measured
// sizes' line says -- but never less than the same step within a host (at
// distance 1), since the bytes still pass through the host's memory (an
// emulated link hands them to the real transport at once and only delays
// their arrival) -- plus, for an exchange or a hop that reduces, what the
// reduction costs the host at that size, as the vector is reduced after it
// has arrived. A ring step reduces each segment while the next is on the
// wire, so there the slower of the link and the host sets the pace.
double StepSeconds(const NetworkCost& network, LinkClass link, StepKind kind, double bytes,
                   int distance_index = 0);

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_STEP_COSTS_H_
