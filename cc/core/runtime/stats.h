// Counters the runtime keeps so that users and tests can see what happened
// (for example, that fusion put several tensors into one collective).
#ifndef TFDIST_CORE_RUNTIME_STATS_H_
#define TFDIST_CORE_RUNTIME_STATS_H_

#include <atomic>
#include <cstdint>

#include "cc/core/collectives/algorithm.h"

namespace tfdist {

struct Stats {
  std::atomic<uint64_t> allreduce_calls{0};   // allreduce collectives executed
  std::atomic<uint64_t> tensors_reduced{0};   // tensors that went through them
  std::atomic<uint64_t> bytes_reduced{0};
  // Payload bytes this rank sent in collectives (counting_transport.h), and
  // how many more it would have sent without wire compression
  // (tfdist.stats()'s bytes_uncompressed is the sum of the two).
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_saved_by_compression{0};
  // Of bytes_sent, those copied into a shared segment for the ranks of this
  // rank's host instead of sent (the "shm" and "hierarchical_shm"
  // algorithms).
  std::atomic<uint64_t> bytes_through_shared_memory{0};
  std::atomic<uint64_t> allgather_calls{0};
  std::atomic<uint64_t> broadcast_calls{0};
  std::atomic<uint64_t> alltoall_calls{0};
  std::atomic<uint64_t> reducescatter_calls{0};
  std::atomic<uint64_t> negotiation_rounds{0};
  std::atomic<uint64_t> cached_rounds{0};     // rounds settled by the bit vector alone
  std::atomic<uint64_t> errors{0};
  // Where the rounds that carried this rank's requests spent their time, in
  // nanoseconds, summed (docs/runtime.md, "Where a graph step's time goes"):
  // from the first request's enqueue to the last one's (a burst arriving);
  // from the last enqueue to the round's start (the thread that runs it
  // waking, the settle wait); the negotiation round; the collectives; and
  // the kernels' completion callbacks, which run TensorFlow's executor (the
  // ops that consume the results) on the thread that calls them.
  std::atomic<uint64_t> arrival_ns{0};
  std::atomic<uint64_t> pickup_ns{0};
  std::atomic<uint64_t> negotiation_ns{0};
  std::atomic<uint64_t> collectives_ns{0};
  std::atomic<uint64_t> completion_ns{0};
  // Allreduce executions per algorithm, indexed by AllreduceAlgorithm.
  std::atomic<uint64_t> algorithm_calls[kAllreduceAlgorithmCount]{};
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_STATS_H_
