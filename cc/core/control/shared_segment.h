// Memory that every rank of a group on one host maps: a POSIX shared-memory
// object, one page-aligned region per rank (the "shm" allreduce's slots,
// shared_memory_allreduce.h).
//
// Rank 0 creates the object under a name of its own process id, reserves
// its pages (posix_fallocate: a /dev/shm too small fails here, with a
// reason, rather than killing a process with SIGBUS at its first write),
// and tells the others the name; each maps it; once all have, rank 0
// unlinks the name, so that nothing is left in /dev/shm however the job
// ends. The mapping goes with the last SharedSegment's destructor.
#ifndef TFDIST_CORE_CONTROL_SHARED_SEGMENT_H_
#define TFDIST_CORE_CONTROL_SHARED_SEGMENT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cc/core/base/status.h"
#include "cc/core/control/control_plane.h"

namespace tfdist {

class SharedSegment {
 public:
  // Collective over `control_plane`, whose ranks must all be on this host.
  // Maps a segment of one zeroed region of `region_bytes` per rank into
  // *out. Where some rank cannot (no /dev/shm, too little room, another
  // user's ranks), every rank leaves *out null and gets the first failing
  // rank's reason in *why_not, and returns OK: the caller goes on without
  // it. Fails only where the control plane does.
  static Status Create(ControlPlane& control_plane, size_t region_bytes,
                       std::unique_ptr<SharedSegment>* out, std::string* why_not);

  // Takes over a mapping of `ranks` regions `region_stride` apart (Create
  // makes one).
  SharedSegment(char* base, size_t mapped_bytes, size_t region_stride, int ranks)
      : base_(base), mapped_bytes_(mapped_bytes), region_stride_(region_stride),
        ranks_(ranks) {}
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // Every rank's region, by rank, in this process's mapping.
  std::vector<char*> regions() const;

 private:
  char* const base_;
  const size_t mapped_bytes_;
  const size_t region_stride_;
  const int ranks_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_CONTROL_SHARED_SEGMENT_H_
