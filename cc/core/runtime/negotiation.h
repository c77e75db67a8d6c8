// Agreeing, between ranks, which tensors are ready everywhere and in which
// order to run them: the heart of the runtime contract (docs/design.md).
//
// Every round, each rank contributes the descriptions of the tensors it was
// handed since its last round. All contributions are allgathered, so every
// rank updates an identical table: name -> the description each rank gave.
// A name is ready when all ranks have described it; ready names run in the
// order in which the table first saw them. Because every rank computes the
// same answer from the same bytes, no coordinator is needed and a mismatch is
// reported identically everywhere.
//
// Steady state is cheap: a tensor that ran before with the same description
// gets a slot in a response cache kept identically on all ranks. A rank then
// announces it by setting that slot's bit; one bitwise-AND allreduce of the
// bit vectors says which cached tensors are ready everywhere, and the full
// allgather runs only in rounds where some rank has something new to say.
// The cache holds cache_capacity tensors and evicts the least recently used.
// Unnamed eager ops' sequence names (IsSequenceName) never recur and are not
// cached at all, nor are joins.
//
// Joins (join_state.h): a rank's join announcement marks it joined on every
// rank. From the next round on, it sets every bit of the bit vector, so a
// cached tensor is ready when the ranks still training announced it, and a
// tensor in the table is ready when every rank announced it or joined.
//
// Broadcast words: with broadcast_words > 0, the bit exchange also carries
// that many words from rank 0 (every other rank contributes all ones, so the
// AND is rank 0's words) and every rank reads them in the same round. The
// autotuner's proposals ride on them (autotuner.h), so that all ranks switch
// parameters at the same round, for 8 bytes a word and no extra message.
//
// Stall eviction (elastic training): a rank whose collective has waited past
// TFDIST_STALL_SHUTDOWN_TIME asks for it (RequestEviction), a flag in the
// next round's bit exchange. Every rank sees the flag in the same round and
// says everything it waits on in full the round after, cache or not; then
// every rank computes from its identical table the same verdict: the ranks
// missing from the oldest waiting collective that wait on no collective of
// their own (stuck outside tfdist, or too slow). Ranks that wait on each
// other (a mismatch, not a hang) are never evicted: the verdict is empty.
//
// It talks to the other ranks only through a ControlPlane (control_plane.h):
// MPI in production, threads as ranks in the unit tests.
#ifndef TFDIST_CORE_RUNTIME_NEGOTIATION_H_
#define TFDIST_CORE_RUNTIME_NEGOTIATION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cc/core/runtime/join_state.h"
#include "cc/core/runtime/request.h"
#include "cc/core/base/status.h"
#include "cc/core/control/control_plane.h"

namespace tfdist {

struct Announcement {
  std::string name;
  TensorDescription description;
};

struct ReadyTensor {
  std::string name;
  // Indexed by rank; a stand-in's entry is the one DescribeStandIns gives it.
  std::vector<TensorDescription> per_rank;
  // Ranks that have joined and stand in for this tensor (join_state.h).
  std::vector<int> stand_ins;
  // A join only: the rank whose join came last, which join() returns.
  int last_joined = -1;
};

struct RoundResult {
  std::vector<ReadyTensor> ready;  // in execution order
  bool shutdown = false;           // some rank asked to stop
  // Rank 0's broadcast words in this round (empty without broadcast words).
  std::vector<uint64_t> broadcast;
  // A round that gave a verdict on a requested eviction: the ranks to
  // evict (the same on every rank; empty when none can be blamed) and the
  // collective they kept waiting.
  bool eviction_decided = false;
  std::vector<int> evicted;
  std::string evicted_from;
};

// A tensor some ranks announced and others have not, for the stall report.
struct WaitingTensor {
  std::string name;
  std::vector<int> missing_ranks;
};

class Negotiator {
 public:
  // `control_plane` must outlive the negotiator.
  // `broadcast_words` must be the same on every rank.
  Negotiator(ControlPlane& control_plane, size_t cache_capacity, size_t broadcast_words = 0);
  Negotiator(const Negotiator&) = delete;
  Negotiator& operator=(const Negotiator&) = delete;

  // One round. `fresh` holds what this rank was handed since its last round.
  // Every rank must call Round the same number of times. `wait` is how the
  // round waits for the other ranks (wait_kind.h).
  Status Round(std::vector<Announcement> fresh, bool want_shutdown, WaitKind wait,
               RoundResult* result);

  // Rank 0: the words every rank reads from the next round on (resized to
  // broadcast_words). Ignored on the other ranks.
  void SetBroadcast(std::vector<uint64_t> words);

  std::vector<WaitingTensor> Waiting() const;
  // This rank's join has been read: it stands in until every rank joins.
  bool has_joined() const { return joins_.has_joined(rank_); }
  // From the next round on, say in full what this rank waits on by cache
  // bit, so that Waiting() can name the ranks that never sent it.
  void AnnounceCachedInFull();
  // Forgets, on every rank alike, the members "<group>.<i>" of a grouped op
  // that some rank rejected (validation.h) and that are still waiting:
  // ranks may have announced groups of different lengths, whose extra
  // members would otherwise wait forever. Returns their names; the caller
  // fails this rank's requests of those names.
  std::vector<std::string> Withdraw(const std::string& group);
  // Asks, in the next round, for the ranks that keep a collective waiting
  // to be evicted; a later round's RoundResult gives the verdict.
  void RequestEviction() { eviction_requested_ = true; }
  // True while something must be said next round even if nothing new comes.
  bool has_carry_over() const { return !carry_over_.empty() || eviction_gathering_; }
  uint64_t cached_rounds() const { return cached_rounds_; }

 private:
  struct Entry {
    std::vector<TensorDescription> per_rank;
    std::vector<bool> seen;
    int seen_count = 0;
    uint64_t first_seen_sequence = 0;  // orders ready tensors, the same on every rank
  };
  struct CacheSlot {
    std::string name;
    std::vector<TensorDescription> per_rank;  // what each rank said last time
    bool in_use = false;
    uint64_t last_used = 0;  // use_clock_ when last filled or run; the same on every rank
  };

  Status ExchangeBits(bool have_news, bool want_shutdown, bool want_eviction, WaitKind wait,
                      bool* anyone_has_news, bool* anyone_shuts_down, bool* anyone_evicts,
                      std::vector<int>* ready_slots, std::vector<uint64_t>* broadcast);
  // The eviction verdict from the table, after a round in which every rank
  // said in full what it waits on.
  void DecideEviction(RoundResult* result) const;
  Status ExchangeAnnouncements(const std::vector<Announcement>& news, WaitKind wait,
                               std::vector<std::vector<uint8_t>>* per_rank);
  void Record(int rank, Announcement announcement);
  void RememberInCache(const ReadyTensor& tensor);
  // Frees `index` (its tensor changed or it is evicted); a tensor this rank
  // announced by that slot's bit is said again in full next round.
  void ForgetSlot(int index);

  ControlPlane& control_plane_;
  int rank_ = 0;
  int size_ = 1;
  size_t cache_capacity_;
  size_t broadcast_words_;
  std::vector<uint64_t> broadcast_;  // rank 0's words

  std::map<std::string, Entry> table_;
  JoinState joins_;
  uint64_t next_sequence_ = 0;

  // When full, the least recently used slot is evicted: every rank makes
  // the same uses in the same order, so every rank evicts the same slot.
  std::vector<CacheSlot> cache_;
  uint64_t use_clock_ = 0;
  std::map<std::string, int> cache_slot_of_;
  // Cached tensors this rank announced by bit and still waits on.
  std::vector<uint64_t> my_pending_bits_;
  std::map<int, Announcement> my_pending_cached_;
  // Announcements whose cache slot was forgotten; said in full next round.
  std::vector<Announcement> carry_over_;

  uint64_t cached_rounds_ = 0;
  // This rank asks for an eviction in its next round.
  bool eviction_requested_ = false;
  // Some rank asked last round: this round every rank says in full what it
  // waits on, then the verdict. The same on every rank.
  bool eviction_gathering_ = false;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_NEGOTIATION_H_
