// Ring allgatherv.
//
// Rank r first copies its own block into place in `recv`. Then, in steps
// t = 0 .. P-2, it sends block (r - t) to rank r+1 and receives block
// (r - t - 1) from rank r-1 straight into place: each block travels once
// around the ring. Blocks move as pipelined segments of at most 1 MiB
// (ring_pipeline.h), so a large block is forwarded while still arriving.
//
// Steps: P-1.  Bytes on the wire per rank: sends and receives every block but
// one, total - b[r+1] and total - b[r] respectively (about m(P-1)/P for equal
// blocks, m = the gathered size).  Time: (P-1) * L + m(P-1)/P * G.
#include "cc/core/collectives/allgather.h"

#include <cstring>
#include <string>

#include "cc/core/transport/collective_tags.h"
#include "cc/core/collectives/ring_pipeline.h"

namespace tfdist {

Status RingAllgatherv(Transport& transport, const void* send, size_t send_bytes,
                      void* recv, const std::vector<size_t>& bytes_per_rank) {
  const int size = transport.size();
  const int rank = transport.rank();
  if (static_cast<int>(bytes_per_rank.size()) != size) {
    return Status::InvalidArgument(
        "allgatherv needs one block size per rank: got " +
        std::to_string(bytes_per_rank.size()) + " for " + std::to_string(size) +
        " ranks");
  }
  if (send_bytes != bytes_per_rank[rank]) {
    return Status::InvalidArgument(
        "allgatherv: rank " + std::to_string(rank) + " sends " +
        std::to_string(send_bytes) + " bytes but bytes_per_rank says " +
        std::to_string(bytes_per_rank[rank]));
  }

  RingSchedule schedule;
  schedule.chunk_offsets.resize(size + 1, 0);
  for (int block = 0; block < size; ++block) {
    schedule.chunk_offsets[block + 1] =
        schedule.chunk_offsets[block] + bytes_per_rank[block];
  }
  unsigned char* own_block =
      static_cast<unsigned char*>(recv) + schedule.chunk_offsets[rank];
  if (send_bytes > 0 && send != own_block) {
    std::memcpy(own_block, send, send_bytes);
  }

  schedule.element_size = 1;
  schedule.shift = 0;
  schedule.copy_steps = size - 1;
  schedule.tag = kAllgatherTag;
  return RunRingSchedule(transport, recv, schedule);
}

}  // namespace tfdist
