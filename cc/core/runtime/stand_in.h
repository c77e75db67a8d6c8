// The request a rank that has joined (join_state.h) runs for a tensor that
// the ranks still training submitted: it owns the buffers a broadcast,
// allgather or reducescatter writes to, which are thrown away, and reads no
// input (the executor contributes the reduction's identity, or no rows, and
// runs an allreduce's stand-in in its own fusion buffer).
#ifndef TFDIST_CORE_RUNTIME_STAND_IN_H_
#define TFDIST_CORE_RUNTIME_STAND_IN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/core/runtime/request.h"

namespace tfdist {

struct StandIn {
  // `description` is what DescribeStandIns gave this rank.
  StandIn(const std::string& name, const TensorDescription& description);
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  Request request;  // its callbacks point into this object

 private:
  // What `request.input` points at: a stand-in sends nothing of its own,
  // but a zero-byte copy still wants a valid address, and output_ moves
  // when allocate_output resizes it.
  uint8_t no_input_[1] = {};
  std::vector<uint8_t> output_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_STAND_IN_H_
