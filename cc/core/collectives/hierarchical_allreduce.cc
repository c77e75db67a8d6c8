// Hierarchical (two-level) allreduce, for ranks spread over H hosts of k
// ranks each, where links between hosts are slower than within one.
//
//  1. Reduce-scatter within each host (ring, reducescatter.h): local rank l
//     ends with shard l (chunk l of k, chunk_layout.h) reduced over its host.
//  2. Cross-host allreduce of shard l among the H ranks with local rank l,
//     one per host, with the flat algorithm the cost model picks for a shard
//     of that size on the inter-host link. The k cross groups run at once,
//     each rank on its own NIC.
//  3. Allgather within each host (ring, allgather.h): every rank gets all k
//     reduced shards.
// Each shard is reduced along one path and then copied, so every rank ends
// with the same bits. Each rank sends about 2(H-1)/H * m/k bytes across
// hosts (m/k with butterfly), instead of the flat ring's 2m(P-1)/P in steps
// bounded by the slow links.
//
// Time: T_hier = T_rs(k, m) + T_best(H, m/k, inter) + T_ag(k, m), with
//   T_rs = (k-1) * (L_i + (m/k)*G_i) + (k-1)/k * m*max(0, R-G_i)
//   T_ag = (k-1) * (L_i + (m/k)*G_i)
// on the intra-host link (cost_model.cc).
#include "cc/core/collectives/hierarchical_allreduce.h"

#include <string>
#include <vector>

#include "cc/core/collectives/allgather.h"
#include "cc/core/collectives/allreduce.h"
#include "cc/core/collectives/chunk_layout.h"
#include "cc/core/collectives/reducescatter.h"
#include "cc/core/collectives/reduction.h"
#include "cc/core/transport/subgroup_transport.h"

namespace tfdist {

Status HierarchicalAllreduce(Transport& transport, const HostLayout& layout,
                             const LinkCost& inter_host, void* buffer, size_t count,
                             DataType dtype, ReduceOp op) {
  TFDIST_RETURN_IF_ERROR(CheckReducible(dtype, op));
  if (layout.size() != transport.size()) {
    return Status::InvalidArgument("hierarchical allreduce: the host layout has " +
                                   std::to_string(layout.size()) + " ranks, the group " +
                                   std::to_string(transport.size()));
  }
  if (!layout.uniform()) {
    return Status::InvalidArgument(
        "hierarchical allreduce needs the same number of ranks on every host; "
        "use a flat algorithm (or TFDIST_VIRTUAL_HOSTS) for this job");
  }
  if (transport.size() == 1 || count == 0) return Status::OK();

  const int me = transport.rank();
  const int per_host = layout.ranks_per_host();
  const int local_rank = layout.local_rank(me);
  const size_t element_size = DataTypeSize(dtype);
  unsigned char* data = static_cast<unsigned char*>(buffer);

  std::vector<size_t> shard_counts(per_host);
  std::vector<size_t> shard_bytes(per_host);
  for (int shard = 0; shard < per_host; ++shard) {
    shard_counts[shard] =
        ChunkBegin(count, per_host, shard + 1) - ChunkBegin(count, per_host, shard);
    shard_bytes[shard] = shard_counts[shard] * element_size;
  }
  unsigned char* own_shard = data + ChunkBegin(count, per_host, local_rank) * element_size;

  SubgroupTransport host(transport, layout.ranks_of_host(layout.host_of(me)));
  if (per_host > 1) {
    TFDIST_RETURN_IF_ERROR(RingReducescatter(host, buffer, shard_counts, dtype, op));
  }
  if (layout.host_count() > 1) {
    SubgroupTransport cross(transport, layout.CrossGroup(local_rank));
    const AllreduceAlgorithm flat =
        ChooseAllreduce(cross.size(), shard_bytes[local_rank], inter_host);
    TFDIST_RETURN_IF_ERROR(
        RunAllreduce(flat, cross, own_shard, shard_counts[local_rank], dtype, op));
  }
  if (per_host > 1) {
    TFDIST_RETURN_IF_ERROR(
        RingAllgatherv(host, own_shard, shard_bytes[local_rank], buffer, shard_bytes));
  }
  return Status::OK();
}

}  // namespace tfdist
