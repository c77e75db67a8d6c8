// A view of some ranks of a Transport as a group of their own: member i of
// `members` is rank i of the view. Lets an algorithm written for a whole
// group (a ring, a butterfly) run among the ranks of one host, or among one
// rank per host, unchanged. Messages go through the parent with the same
// tag, so views of disjoint rank sets never meet, and a view used after
// another one on the same pair of ranks keeps MPI's ordering.
#ifndef TFDIST_CORE_TRANSPORT_SUBGROUP_TRANSPORT_H_
#define TFDIST_CORE_TRANSPORT_SUBGROUP_TRANSPORT_H_

#include <vector>

#include "cc/core/transport/transport.h"

namespace tfdist {

class SubgroupTransport : public Transport {
 public:
  // `members`: distinct ranks of `parent`, including parent.rank().
  SubgroupTransport(Transport& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  bool AllowsConcurrentCalls() const override { return parent_.AllowsConcurrentCalls(); }
  std::unique_ptr<PendingOp> StartSend(int peer, const void* data, size_t bytes,
                                       int tag) override;
  std::unique_ptr<PendingOp> StartRecv(int peer, void* data, size_t bytes,
                                       int tag) override;
  Status SendRecv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer,
                  void* recv_data, size_t recv_bytes, int tag) override;

 private:
  Transport& parent_;
  std::vector<int> members_;
  int rank_ = 0;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_SUBGROUP_TRANSPORT_H_
