// CollectiveExecutor's Adasum path (executor.h): the group's tensors packed
// into the fusion buffer in the accumulation type (16-bit floats as float32),
// prescaled, combined tensor by tensor (adasum_allreduce.h), postscaled on
// the way out. The `algorithm` of the description does not apply: Adasum is
// its own algorithm.
#include <vector>

#include "cc/core/collectives/adasum_allreduce.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/runtime/executor.h"

namespace tfdist {

Status CollectiveExecutor::AllreduceAdasum(const std::vector<Request*>& group) {
  const TensorDescription& d = group[0]->description;
  const DataType accumulation = AccumulationType(d.dtype);
  const size_t element = DataTypeSize(accumulation);
  std::vector<size_t> counts;
  size_t total = 0;
  for (const Request* r : group) {
    counts.push_back(static_cast<size_t>(r->description.num_elements()));
    total += counts.back();
  }
  const size_t bytes = total * element;
  if (fusion_buffer_.size() < bytes) fusion_buffer_.resize(bytes);
  unsigned char* buffer = fusion_buffer_.data();
  const std::string& label = group[0]->name;

  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_IN", group.size(), bytes);
    size_t offset = 0;
    for (size_t i = 0; i < group.size(); ++i) {
      // A stand-in's identity (zeros) is what Adasum leaves out.
      CopyIn(*group[i], buffer + offset, accumulation, counts[i]);
      offset += counts[i] * element;
    }
  }
  {
    TimelineSpan span(timeline_, label, "ALLREDUCE", group.size(), bytes, "adasum");
    TFDIST_RETURN_IF_ERROR(AdasumAllreduce(wire_, buffer, counts, accumulation));
  }
  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_OUT", group.size(), bytes);
    size_t offset = 0;
    for (size_t i = 0; i < group.size(); ++i) {
      if (!group[i]->stand_in) {
        ConvertScaled(buffer + offset, accumulation, group[i]->output, d.dtype, counts[i],
                      d.postscale);
      }
      offset += counts[i] * element;
    }
  }
  stats_.allreduce_calls++;
  stats_.tensors_reduced += group.size();
  stats_.bytes_reduced += bytes;
  Log("allreduce", label, group.size(), bytes, "adasum");
  return Status::OK();
}

}  // namespace tfdist
