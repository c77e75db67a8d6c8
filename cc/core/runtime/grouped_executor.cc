// CollectiveExecutor's fused grouped allgather and reducescatter
// (executor.h): the members that fusion.h put together run as one
// collective over the fusion buffer.
//
// Allgather: rank r's block of the buffer holds, member after member, the
// rows each member has on rank r; one ring allgatherv of the blocks, then
// each member's output takes its rows from every block in rank order.
// Reducescatter: rank r's segment holds, member after member, the rows of
// each member that rank r gets (split as Reducescatter splits one tensor);
// one ring reduce-scatter of the segments, then each member's output takes
// its part of this rank's segment.
#include <cstring>
#include <vector>

#include "cc/core/collectives/allgather.h"
#include "cc/core/collectives/reducescatter.h"
#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/runtime/executor.h"

namespace tfdist {

namespace {

std::vector<int64_t> WithRows(const TensorDescription& d, int64_t rows) {
  std::vector<int64_t> shape = d.shape;
  shape[0] = rows;
  return shape;
}

// Reducescatter's split: rows as evenly as possible, the first rows % P
// ranks one more.
int64_t RowsOf(int64_t rows, int size, int rank) {
  return rows / size + (rank < rows % size ? 1 : 0);
}

}  // namespace

Status CollectiveExecutor::GroupedAllgather(
    const std::vector<Request*>& members,
    const std::vector<const std::vector<TensorDescription>*>& per_rank) {
  const int size = transport_.size();
  const int me = transport_.rank();
  // bytes[m][r]: member m's rows on rank r, in bytes.
  std::vector<std::vector<size_t>> bytes(members.size(), std::vector<size_t>(size));
  std::vector<size_t> block_bytes(size, 0);
  for (size_t m = 0; m < members.size(); ++m) {
    const TensorDescription& d = members[m]->description;
    const size_t row_bytes = static_cast<size_t>(d.row_elements()) * DataTypeSize(d.dtype);
    for (int r = 0; r < size; ++r) {
      bytes[m][r] = static_cast<size_t>((*per_rank[m])[r].shape[0]) * row_bytes;
      block_bytes[r] += bytes[m][r];
    }
  }
  std::vector<size_t> block_offset(size + 1, 0);
  for (int r = 0; r < size; ++r) block_offset[r + 1] = block_offset[r] + block_bytes[r];
  const size_t total = block_offset[size];

  // Outputs first: a failure here must come before any byte is sent.
  std::vector<unsigned char*> outputs(members.size());
  for (size_t m = 0; m < members.size(); ++m) {
    int64_t rows = 0;
    for (int r = 0; r < size; ++r) rows += (*per_rank[m])[r].shape[0];
    void* output = nullptr;
    TFDIST_RETURN_IF_ERROR(
        members[m]->allocate_output(WithRows(members[m]->description, rows), &output));
    outputs[m] = static_cast<unsigned char*>(output);
  }
  if (fusion_buffer_.size() < total) fusion_buffer_.resize(total);
  unsigned char* buffer = fusion_buffer_.data();
  const std::string& label = members[0]->name;

  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_IN", members.size(), block_bytes[me]);
    size_t position = block_offset[me];
    for (size_t m = 0; m < members.size(); ++m) {
      if (bytes[m][me] > 0) std::memcpy(buffer + position, members[m]->input, bytes[m][me]);
      position += bytes[m][me];
    }
  }
  {
    TimelineSpan span(timeline_, label, "ALLGATHER", members.size(), total, "ring");
    TFDIST_RETURN_IF_ERROR(RingAllgatherv(wire_, buffer + block_offset[me], block_bytes[me],
                                          buffer, block_bytes));
  }
  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_OUT", members.size(), total);
    std::vector<size_t> cursor(block_offset.begin(), block_offset.end() - 1);
    for (size_t m = 0; m < members.size(); ++m) {
      size_t written = 0;
      for (int r = 0; r < size; ++r) {
        if (bytes[m][r] > 0) std::memcpy(outputs[m] + written, buffer + cursor[r], bytes[m][r]);
        written += bytes[m][r];
        cursor[r] += bytes[m][r];
      }
    }
  }
  stats_.allgather_calls++;
  Log("allgather", label, members.size(), total, "ring");
  return Status::OK();
}

Status CollectiveExecutor::GroupedReducescatter(const std::vector<Request*>& members) {
  const int size = transport_.size();
  const int me = transport_.rank();
  const TensorDescription& first = members[0]->description;
  const DataType accumulation = AccumulationType(first.dtype);
  const size_t element = DataTypeSize(accumulation);
  // counts[m][r]: member m's elements that rank r gets; starts[m][r]: where
  // they begin in member m's input.
  std::vector<std::vector<size_t>> counts(members.size(), std::vector<size_t>(size));
  std::vector<std::vector<size_t>> starts(members.size(), std::vector<size_t>(size));
  std::vector<size_t> segment(size, 0);
  std::vector<void*> outputs(members.size());
  for (size_t m = 0; m < members.size(); ++m) {
    const TensorDescription& d = members[m]->description;
    const size_t row_elements = static_cast<size_t>(d.row_elements());
    size_t start = 0;
    for (int r = 0; r < size; ++r) {
      counts[m][r] = static_cast<size_t>(RowsOf(d.shape[0], size, r)) * row_elements;
      starts[m][r] = start;
      start += counts[m][r];
      segment[r] += counts[m][r];
    }
    TFDIST_RETURN_IF_ERROR(
        members[m]->allocate_output(WithRows(d, RowsOf(d.shape[0], size, me)), &outputs[m]));
  }
  size_t total = 0;
  size_t my_offset = 0;
  for (int r = 0; r < size; ++r) {
    if (r == me) my_offset = total;
    total += segment[r];
  }
  if (fusion_buffer_.size() < total * element) fusion_buffer_.resize(total * element);
  unsigned char* buffer = fusion_buffer_.data();
  const std::string& label = members[0]->name;

  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_IN", members.size(), total * element);
    size_t position = 0;
    for (int r = 0; r < size; ++r) {
      for (size_t m = 0; m < members.size(); ++m) {
        const Request& request = *members[m];
        const TensorDescription& d = request.description;
        unsigned char* destination = buffer + position * element;
        if (request.stand_in) {
          FillIdentity(destination, counts[m][r], accumulation, d.op);
        } else {
          const unsigned char* source = static_cast<const unsigned char*>(request.input) +
                                        starts[m][r] * DataTypeSize(d.dtype);
          ConvertScaled(source, d.dtype, destination, accumulation, counts[m][r], d.prescale);
        }
        position += counts[m][r];
      }
    }
  }
  {
    TimelineSpan span(timeline_, label, "REDUCESCATTER", members.size(), total * element,
                      "ring");
    TFDIST_RETURN_IF_ERROR(RingReducescatter(wire_, buffer, segment, accumulation, first.op));
  }
  {
    TimelineSpan span(timeline_, label, "FUSION_COPY_OUT", members.size(), total * element);
    size_t position = my_offset;
    for (size_t m = 0; m < members.size(); ++m) {
      const TensorDescription& d = members[m]->description;
      ConvertScaled(buffer + position * element, accumulation, outputs[m], d.dtype,
                    counts[m][me], d.postscale);
      position += counts[m][me];
    }
  }
  stats_.reducescatter_calls++;
  Log("reducescatter", label, members.size(), total * element, "ring");
  return Status::OK();
}

}  // namespace tfdist
