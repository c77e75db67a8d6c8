// The "shm" allreduce: ranks on one host reduce through memory they all map
// (cc/core/control/shared_segment.h) instead of sending messages.
//
// Each rank owns a region: a control block and two slots. A call goes
// through its data a slot at a time; for each slot-sized chunk split into P
// parts, rank r
//   1. copies every part but its own from its input into its slot, and says
//      so (its `arrived` counter);
//   2. once every peer has arrived, reduces part r: its input's part r with
//      every peer's slot's part r, scaled, into its own slot's part r, and
//      says so (`reduced`);
//   3. once every peer has reduced, copies each rank's reduced part from
//      that rank's slot into its output, and says so (`copied`).
// Each element is reduced (and scaled) by one rank, so every rank ends with
// the same bits. Per rank that is one read of the input, a (P−1)/P write into
// the slot, the reduction of 1/P, and one write of the output: the memory
// traffic of a copy and a bit, with no messages, fragments or handshakes,
// which at np 2 made it 0.69-0.79× MPI_Allreduce at 1-4 MiB after a pass of
// computation over other memory (docs/algorithms.md).
//
// Consecutive chunks alternate between the two slots, so that a rank can
// fill one while a slower peer still copies the other out: before rank r
// refills a slot used in round k−2, every peer must have copied round k−2's
// results out (its `copied` counter).
//
// Across hosts (AllreduceSpansAcrossHosts, the intra-host phases of
// hierarchical allreduce on a host's own segment): between steps 2 and 3,
// each rank allreduces its reduced part with the ranks of the same local
// rank on the other hosts, on the caller's side thread, while the calling
// thread fills and reduces the next chunk; only then does it say `reduced`.
// Whether that copies less than the message phases it replaces (a ring's
// reduce-scatter and allgather within the host) depends on MPI: where it
// moves a message with one copy (CMA), those copy half the buffer each,
// and the segment copies half in and all of it out; where it copies twice,
// the segment copies less (docs/algorithms.md, "hierarchical_shm").
//
// Waits poll the peers' counters politely (polite_wait.h), and past a second
// check that the peer's process still exists: a peer that died makes the
// call fail with Internal instead of hanging. Every rank must make the same
// sequence of calls (the runtime's negotiation sees to that); calls must not
// overlap (one thread at a time).
#ifndef TFDIST_CORE_COLLECTIVES_SHARED_MEMORY_ALLREDUCE_H_
#define TFDIST_CORE_COLLECTIVES_SHARED_MEMORY_ALLREDUCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"
#include "cc/core/collectives/ring_pipeline.h"

namespace tfdist {

class SharedMemoryAllreduce {
 public:
  // The bytes of one rank's region for slots of `slot_bytes`.
  static size_t RegionBytes(size_t slot_bytes);

  // `regions[q]`: rank q's region of RegionBytes(slot_bytes) bytes, mapped in
  // this process, 64-byte aligned, and zero before any rank's first call.
  // `slot_bytes` must be a multiple of 64 and hold at least 8 elements.
  // `oversubscribed`: more ranks than cores (polite_wait.h). `process_id`:
  // what the peers check is alive, this process's id where 0 (tests name
  // another).
  SharedMemoryAllreduce(int rank, std::vector<char*> regions, size_t slot_bytes,
                        bool oversubscribed, int64_t process_id = 0);
  SharedMemoryAllreduce(const SharedMemoryAllreduce&) = delete;
  SharedMemoryAllreduce& operator=(const SharedMemoryAllreduce&) = delete;

  // Whether this process can see every peer's process, which the check for
  // a dead peer needs: ranks in separate PID namespaces (containers sharing
  // /dev/shm) cannot, and would take each other for dead. Call once every
  // rank has constructed its object.
  bool PeersVisible() const;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(regions_.size()); }
  size_t slot_bytes() const { return slot_bytes_; }

  // output = (op over the ranks' inputs) × result_scale; `input == output`
  // is in place, otherwise they must not overlap. Precondition:
  // CheckReducible(dtype, op) is OK.
  Status Allreduce(const void* input, void* output, size_t count, DataType dtype, ReduceOp op,
                   double result_scale = 1.0);

  // The same over several spans taken as one vector, in order, each read
  // and written where it lies (ring_pipeline.h's RingSpan: `data` receives
  // the result, read from `source`, or from `data` itself where null): a
  // fused group whose large members are not packed runs as one collective.
  Status AllreduceSpans(const std::vector<RingSpan>& spans, DataType dtype, ReduceOp op,
                        double result_scale = 1.0);

  // The phase across hosts for one chunk: `part` holds `count` elements of
  // this rank's part, reduced over its host; the call leaves them reduced
  // over every host (the same bits on every rank that holds that part).
  // Runs on the caller's side thread (side_thread.h), one chunk at a time,
  // in order.
  using CrossPhase = std::function<Status(void* part, size_t count)>;

  // The same reduction over every host: the ranks of this object's group
  // (one host's) reduce each chunk as AllreduceSpans does, `cross` takes
  // each rank's part across hosts, and every rank copies the chunk out
  // scaled by `result_scale`. Chunks of `chunk_bytes` (rounded down to
  // whole elements, at least one, at most the slot), the same on every
  // rank of every host so that the parts across hosts match. Chunk c's
  // `cross` overlaps chunk c + 1's steps 1 and 2.
  Status AllreduceSpansAcrossHosts(const std::vector<RingSpan>& spans, DataType dtype,
                                   ReduceOp op, double result_scale, size_t chunk_bytes,
                                   const CrossPhase& cross);

 private:
  struct Control;
  Control& control(int q) const;
  char* slot(int q, uint64_t round) const;
  // Until every peer's `counter` is at least `round`.
  Status WaitForPeers(std::atomic<uint64_t> Control::*counter, uint64_t round,
                      const char* step);
  // One chunk of a call: its round, its first byte in the spans taken as
  // one vector, its element count and the element's size.
  struct Chunk {
    uint64_t round;
    size_t done;
    size_t n;
    size_t element;
  };
  // First element of rank q's part of a chunk of n elements.
  size_t PartBegin(size_t n, int q) const;
  // The three steps of the file comment, each after its wait.
  Status FillSlot(const std::vector<RingSpan>& spans, const Chunk& chunk);
  Status ReducePart(const std::vector<RingSpan>& spans, const Chunk& chunk, DataType dtype,
                    ReduceOp op, double factor);
  Status CopyOut(const std::vector<RingSpan>& spans, const Chunk& chunk, DataType dtype,
                 double factor);

  const int rank_;
  const std::vector<char*> regions_;
  const size_t slot_bytes_;
  const bool oversubscribed_;
  uint64_t round_ = 0;  // chunks done, the same on every rank between calls
};

}  // namespace tfdist

#endif  // TFDIST_CORE_COLLECTIVES_SHARED_MEMORY_ALLREDUCE_H_
