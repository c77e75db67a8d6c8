#include "cc/core/runtime/stand_in.h"

#include <algorithm>

namespace tfdist {

StandIn::StandIn(const std::string& name, const TensorDescription& description) {
  request.name = name;
  request.description = description;
  request.stand_in = true;
  // Only a broadcast writes into the kernel-allocated output (the executor
  // runs an allreduce's stand-in in its fusion buffer); the others allocate
  // through allocate_output. At least one byte, so every pointer is real.
  const int64_t elements = description.type == CollectiveType::kBroadcast
                               ? std::max<int64_t>(description.num_elements(), 0)
                               : 0;
  output_.resize(std::max<size_t>(1, static_cast<size_t>(elements) *
                                         DataTypeSize(description.dtype)));
  request.input = no_input_;
  request.output = output_.data();
  request.allocate_output = [this](const std::vector<int64_t>& shape, void** data) {
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    output_.resize(std::max<size_t>(1, static_cast<size_t>(elements) *
                                           DataTypeSize(request.description.dtype)));
    *data = output_.data();
    return Status::OK();
  };
  request.report_splits = [](const std::vector<int64_t>&) { return Status::OK(); };
}

}  // namespace tfdist
