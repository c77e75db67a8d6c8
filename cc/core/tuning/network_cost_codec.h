// NetworkCost as a flat array of doubles: what the C API hands Python
// (tfdist.runtime.network_cost), what the cost-model benchmark hands its
// timer back, and what the calibration cache stores. For each link class
// (intra-host, then inter-host), for each step kind in StepKind order: the
// number of distances, then for each distance the number of points and each
// point's bytes and seconds.
#ifndef TFDIST_CORE_TUNING_NETWORK_COST_CODEC_H_
#define TFDIST_CORE_TUNING_NETWORK_COST_CODEC_H_

#include <cstddef>
#include <vector>

#include "cc/core/tuning/step_costs.h"
#include "cc/core/base/status.h"

namespace tfdist {

void AppendStepCosts(const StepCosts& costs, std::vector<double>* out);
std::vector<double> EncodeNetworkCost(const NetworkCost& network);

// Reads one class from values[*offset ..], advancing *offset. InvalidArgument
// if the values end early or a curve is not Valid().
Status DecodeStepCosts(const std::vector<double>& values, size_t* offset, StepCosts* out);
// The whole array, which must hold both classes and nothing more.
Status DecodeNetworkCost(const std::vector<double>& values, NetworkCost* out);

}  // namespace tfdist

#endif  // TFDIST_CORE_TUNING_NETWORK_COST_CODEC_H_
