// The control plane over point-to-point messages of any Transport: what the
// unit tests run the runtime on (threads as ranks), and what puts control
// traffic through a Transport decorator such as an emulated link. Correct for
// any group size; built for the small messages of negotiation (latency
// rather than bandwidth):
//  * AND allreduce: recursive doubling, log2 P exchanges (plus one latency
//    for the ranks beyond the largest power of two), as MPI_Allreduce does
//    for a few words: one message latency at P = 2 where a reduce to rank 0
//    and a broadcast back cost two, which an emulated link charges in full;
//  * allgatherv: every rank's bytes to rank 0, then the sizes and the
//    concatenation down the binomial broadcast tree;
//  * barrier: dissemination (log2 P rounds of empty messages).
// Its tags (collective_tags.h, ControlPlaneTag) never meet a collective's.
// The transport's own waits are used as they are: WaitKind is ignored.
#ifndef TFDIST_CORE_CONTROL_TRANSPORT_CONTROL_PLANE_H_
#define TFDIST_CORE_CONTROL_TRANSPORT_CONTROL_PLANE_H_

#include <functional>
#include <string>
#include <vector>

#include "cc/core/control/control_plane.h"
#include "cc/core/transport/transport.h"

namespace tfdist {

class TransportControlPlane : public ControlPlane {
 public:
  // What Abort does: end the job everywhere (an InProcessFabric's Abort in
  // the tests, MPI_Abort under an emulated link). Without one, Abort prints
  // the reason and aborts the process.
  using AbortAction = std::function<void(const std::string& reason)>;

  // `transport` must outlive this object.
  explicit TransportControlPlane(Transport& transport, AbortAction abort = nullptr);

  int rank() const override { return transport_.rank(); }
  int size() const override { return transport_.size(); }

  Status AndAllreduce(uint64_t* words, size_t count, WaitKind wait) override;
  Status Allgatherv(const std::vector<uint8_t>& mine, WaitKind wait,
                    std::vector<std::vector<uint8_t>>* per_rank) override;
  Status Barrier(WaitKind wait) override;
  void Abort(const std::string& reason) override;

 private:
  Transport& transport_;
  AbortAction abort_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_CONTROL_TRANSPORT_CONTROL_PLANE_H_
