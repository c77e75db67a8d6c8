// Message tags of the collectives, in one list so that no two collide. The
// transport matches on (source, destination, tag) in FIFO order, so a tag is
// not needed for correctness between collectives run one after another; a
// distinct tag per collective turns a cross-rank mismatch (rank A in a ring,
// rank B in a broadcast) into a visible hang or size error on that tag rather
// than silently mixed data. Values stay far below MPI_TAG_UB's minimum 32767.
#ifndef TFDIST_CORE_TRANSPORT_COLLECTIVE_TAGS_H_
#define TFDIST_CORE_TRANSPORT_COLLECTIVE_TAGS_H_

namespace tfdist {

enum CollectiveTag : int {
  kTreeReduceTag = 1001,
  kBroadcastTag = 1002,
  kButterflyTag = 1003,
  kPowerOfTwoFoldTag = 1004,
  kRingAllreduceTag = 1005,
  kRabenseifnerTag = 1006,
  kAllgatherTag = 1007,
  kReducescatterTag = 1008,
  kAlltoallTag = 1009,
  kLinkCostTag = 1010,
  kAdasumTag = 1011,
};

// The control plane over a Transport (transport_control_plane.h) shares the
// Transport with the collectives; its tags live in their own range so that
// collectives added above never meet them.
enum ControlPlaneTag : int {
  kControlReduceTag = 2001,
  kControlResultTag = 2002,
  kControlGatherTag = 2003,
  kControlBarrierTag = 2004,
};

}  // namespace tfdist

#endif  // TFDIST_CORE_TRANSPORT_COLLECTIVE_TAGS_H_
