// The cost model's view of this job, for Python (tfdist.runtime.network_cost
// and the cost-model benchmark): the step curves of both link classes and the
// predicted time of an allreduce.
#include <cstdint>
#include <vector>

#include "cc/core/tuning/cost_model.h"
#include "cc/core/tuning/network_cost_codec.h"
#include "cc/tf/runtime_handle.h"

extern "C" {

// StepKind names (cc/core/tuning/step_costs.h), in the order of the
// curves tfdist_network_cost writes; nullptr past the last.
const char* tfdist_step_kind_name(int value) { return tfdist::StepKindName(value); }

// Writes the network cost (cc/core/tuning/network_cost_codec.h) into
// out[0 .. capacity) if it fits, and returns how many values it has; -1 when
// not initialized.
int64_t tfdist_network_cost(double* out, int64_t capacity) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const std::vector<double> values = tfdist::EncodeNetworkCost(handle.runtime->network_cost());
  const int64_t size = static_cast<int64_t>(values.size());
  if (out != nullptr && capacity >= size) {
    for (int64_t i = 0; i < size; ++i) out[i] = values[i];
  }
  return size;
}

// What the cost model predicts for an allreduce of `bytes` bytes with
// `algorithm` (AllreduceAlgorithm value) on this job's hosts; +inf for one it
// does not model; -1 when not initialized.
double tfdist_predict_allreduce_seconds(int algorithm, uint64_t bytes) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1.0;
  return tfdist::PredictAllreduceSeconds(static_cast<tfdist::AllreduceAlgorithm>(algorithm),
                                         handle.topology.hosts, bytes,
                                         handle.runtime->network_cost());
}

}  // extern "C"
