// The cost model's view of this job, for Python (tfdist.runtime.network_cost
// and the cost-model benchmark): both link classes and the predicted time of
// an allreduce.
#include <cstdint>

#include "cc/core/collectives/cost_model.h"
#include "cc/tf/runtime_handle.h"

extern "C" {

// Fills 10 values: intra-host latency, seconds per byte and reduce seconds
// per byte; inter-host latency and seconds per byte; intra-host memory
// seconds per byte and memory reduce seconds per byte; ranks on the
// machine, its cores and its cache bytes (cost_model.h). 0, or -1 when not
// initialized.
int tfdist_network_cost(double* out) {
  tfdist::RuntimeHandle handle = tfdist::CurrentRuntime();
  if (!handle.runtime) return -1;
  const tfdist::NetworkCost& cost = handle.runtime->network_cost();
  out[0] = cost.intra.latency_s;
  out[1] = cost.intra.seconds_per_byte;
  out[2] = cost.intra.reduce_seconds_per_byte;
  out[3] = cost.inter.latency_s;
  out[4] = cost.inter.seconds_per_byte;
  out[5] = cost.intra.memory_seconds_per_byte;
  out[6] = cost.intra.memory_reduce_seconds_per_byte;
  out[7] = cost.ranks_per_machine;
  out[8] = cost.cores_per_machine;
  out[9] = cost.cache_bytes;
  return 0;
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
