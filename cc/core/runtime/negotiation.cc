#include "cc/core/runtime/negotiation.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "cc/core/runtime/wire.h"

namespace tfdist {

namespace {

// Flag bits in word 0 of the bit exchange. They are inverted ("no news")
// so that one bitwise AND answers "does anybody have news?".
constexpr uint64_t kNoNews = 1u << 0;
constexpr uint64_t kNoShutdown = 1u << 1;
constexpr uint64_t kNoEviction = 1u << 2;

bool SameDescription(const TensorDescription& a, const TensorDescription& b) {
  bool same = true;
  ForEachDescriptionField(
      [&](auto field, const DescriptionField&) { same = same && a.*field == b.*field; });
  return same;
}

// Enums and ints travel as int32, doubles as they are, vectors with their
// length first (wire.h).
template <typename T>
void PutField(ByteWriter& w, const T& value) {
  if constexpr (std::is_enum<T>::value || std::is_same<T, int>::value) {
    w.Put<int32_t>(static_cast<int32_t>(value));
  } else {
    w.Put<T>(value);
  }
}
template <typename T>
void PutField(ByteWriter& w, const std::vector<T>& values) {
  w.PutVector(values);
}
void PutField(ByteWriter& w, const std::string& value) { w.PutString(value); }
template <typename T>
void GetField(ByteReader& r, T* value) {
  if constexpr (std::is_enum<T>::value || std::is_same<T, int>::value) {
    *value = static_cast<T>(r.Get<int32_t>());
  } else {
    *value = r.Get<T>();
  }
}
template <typename T>
void GetField(ByteReader& r, std::vector<T>* values) {
  *values = r.GetVector<T>();
}

void GetField(ByteReader& r, std::string* value) { *value = r.GetString(); }

void WriteDescription(ByteWriter& w, const TensorDescription& d) {
  ForEachDescriptionField([&](auto field, const DescriptionField&) { PutField(w, d.*field); });
}

TensorDescription ReadDescription(ByteReader& r) {
  TensorDescription d;
  ForEachDescriptionField([&](auto field, const DescriptionField&) { GetField(r, &(d.*field)); });
  return d;
}

}  // namespace

Negotiator::Negotiator(ControlPlane& control_plane, size_t cache_capacity,
                       size_t broadcast_words)
    : control_plane_(control_plane),
      rank_(control_plane.rank()),
      size_(control_plane.size()),
      cache_capacity_(cache_capacity),
      broadcast_words_(broadcast_words),
      broadcast_(broadcast_words, 0),
      joins_(size_) {}

void Negotiator::SetBroadcast(std::vector<uint64_t> words) {
  words.resize(broadcast_words_, 0);
  broadcast_ = std::move(words);
}

Status Negotiator::Round(std::vector<Announcement> fresh, bool want_shutdown,
                         WaitKind wait, RoundResult* result) {
  result->ready.clear();
  result->shutdown = false;
  result->broadcast.clear();
  result->eviction_decided = false;
  result->evicted.clear();
  result->evicted_from.clear();
  // Every rank is in the same phase: the flag that started it was ANDed.
  const bool gathering = eviction_gathering_;
  const bool want_eviction = eviction_requested_ && !gathering;
  eviction_requested_ = false;

  // Carry-overs from an invalidated cache slot come first, then what is new
  // (all of it in full while an eviction is being decided: the verdict
  // reads the table, which cached announcements do not reach).
  std::vector<Announcement> news = std::move(carry_over_);
  carry_over_.clear();
  for (Announcement& a : fresh) {
    auto slot = cache_slot_of_.find(a.name);
    if (!gathering && slot != cache_slot_of_.end() &&
        SameDescription(cache_[slot->second].per_rank[rank_], a.description)) {
      const int index = slot->second;
      my_pending_bits_[index / 64] |= uint64_t{1} << (index % 64);
      my_pending_cached_[index] = std::move(a);
    } else {
      news.push_back(std::move(a));
    }
  }

  bool anyone_has_news = false;
  bool anyone_evicts = false;
  std::vector<int> ready_slots;
  TFDIST_RETURN_IF_ERROR(ExchangeBits(!news.empty() || gathering, want_shutdown,
                                      want_eviction, wait, &anyone_has_news,
                                      &result->shutdown, &anyone_evicts, &ready_slots,
                                      &result->broadcast));
  // Joins are read only from announcements, after the bits: the stand-ins
  // of a cached tensor are the ranks that had joined before this round.
  const std::vector<int> joined_before = joins_.StandIns();
  for (int index : ready_slots) {
    CacheSlot& slot = cache_[index];
    slot.last_used = ++use_clock_;
    result->ready.push_back(ReadyTensor{slot.name, slot.per_rank, joined_before});
    DescribeStandIns(joined_before, &result->ready.back().per_rank);
    my_pending_bits_[index / 64] &= ~(uint64_t{1} << (index % 64));
    my_pending_cached_.erase(index);
  }
  if (anyone_evicts && !gathering) {
    // Next round every rank says in full what it still waits on by bit.
    eviction_gathering_ = true;
    AnnounceCachedInFull();
  }
  if (!anyone_has_news) {
    ++cached_rounds_;
    return Status::OK();
  }

  std::vector<std::vector<uint8_t>> per_rank;
  TFDIST_RETURN_IF_ERROR(ExchangeAnnouncements(news, wait, &per_rank));
  for (int r = 0; r < size_; ++r) {
    ByteReader reader(per_rank[r].data(), per_rank[r].size());
    while (!reader.done()) {
      Announcement a;
      a.name = reader.GetString();
      a.description = ReadDescription(reader);
      if (reader.failed()) {
        return Status::Internal("negotiation: malformed announcement from rank " +
                                std::to_string(r));
      }
      Record(r, std::move(a));
    }
  }

  std::vector<std::pair<uint64_t, std::string>> complete;
  for (const auto& [name, entry] : table_) {
    if (entry.seen_count == size_ || joins_.Covers(entry.seen)) {
      complete.emplace_back(entry.first_seen_sequence, name);
    }
  }
  std::sort(complete.begin(), complete.end());
  bool everyone_joined = false;
  for (const auto& [sequence, name] : complete) {
    (void)sequence;
    auto it = table_.find(name);
    ReadyTensor tensor{name, std::move(it->second.per_rank),
                       joins_.StandIns(it->second.seen)};
    table_.erase(it);
    DescribeStandIns(tensor.stand_ins, &tensor.per_rank);
    if (tensor.per_rank[0].type == CollectiveType::kJoin) {
      tensor.last_joined = joins_.last_joined();
      everyone_joined = true;
    }
    RememberInCache(tensor);
    result->ready.push_back(std::move(tensor));
  }
  if (everyone_joined) joins_.Reset();
  if (gathering) {
    eviction_gathering_ = false;
    DecideEviction(result);
  }
  return Status::OK();
}

void Negotiator::DecideEviction(RoundResult* result) const {
  result->eviction_decided = true;
  // Ranks that wait on a collective of their own are alive in tfdist.
  std::vector<bool> waiting(size_, false);
  const Entry* oldest = nullptr;
  const std::string* oldest_name = nullptr;
  for (const auto& [name, entry] : table_) {
    bool join = false;
    for (int r = 0; r < size_; ++r) {
      if (!entry.seen[r]) continue;
      waiting[r] = true;
      join = join || entry.per_rank[r].type == CollectiveType::kJoin;
    }
    // A join waits for the others by design: it is no stall (stall_inspector.h).
    if (join) continue;
    if (oldest == nullptr || entry.first_seen_sequence < oldest->first_seen_sequence) {
      oldest = &entry;
      oldest_name = &name;
    }
  }
  if (oldest == nullptr) return;
  for (int r = 0; r < size_; ++r) {
    if (!oldest->seen[r] && !joins_.has_joined(r) && !waiting[r]) result->evicted.push_back(r);
  }
  if (!result->evicted.empty()) result->evicted_from = *oldest_name;
}

void Negotiator::Record(int rank, Announcement a) {
  // A rank that describes a cached tensor in full changed its description:
  // forget the slot everywhere (every rank sees the same bytes, so every rank
  // forgets it in this same round). Whoever still waits on it by bit says it
  // again in full next round.
  auto cached = cache_slot_of_.find(a.name);
  if (cached != cache_slot_of_.end()) ForgetSlot(cached->second);
  if (a.description.type == CollectiveType::kJoin) joins_.Join(rank);
  Entry& entry = table_[a.name];
  if (entry.per_rank.empty()) {
    entry.per_rank.resize(size_);
    entry.seen.assign(size_, false);
    entry.first_seen_sequence = next_sequence_++;
  }
  if (!entry.seen[rank]) {
    entry.seen[rank] = true;
    ++entry.seen_count;
  }
  entry.per_rank[rank] = std::move(a.description);
}

void Negotiator::ForgetSlot(int index) {
  CacheSlot& slot = cache_[index];
  cache_slot_of_.erase(slot.name);
  slot.in_use = false;
  auto mine = my_pending_cached_.find(index);
  if (mine != my_pending_cached_.end()) {
    my_pending_bits_[index / 64] &= ~(uint64_t{1} << (index % 64));
    carry_over_.push_back(std::move(mine->second));
    my_pending_cached_.erase(mine);
  }
}

void Negotiator::RememberInCache(const ReadyTensor& tensor) {
  if (cache_capacity_ == 0 || IsSequenceName(tensor.name) ||
      tensor.per_rank[0].type == CollectiveType::kJoin) {
    return;
  }
  int index = -1;
  for (size_t i = 0; i < cache_.size(); ++i) {
    if (!cache_[i].in_use) {
      index = static_cast<int>(i);
      break;
    }
  }
  if (index < 0 && cache_.size() < cache_capacity_) {
    index = static_cast<int>(cache_.size());
    cache_.emplace_back();
    my_pending_bits_.resize((cache_.size() + 63) / 64, 0);
  }
  if (index < 0) {
    index = 0;
    for (size_t i = 1; i < cache_.size(); ++i) {
      if (cache_[i].last_used < cache_[index].last_used) index = static_cast<int>(i);
    }
    ForgetSlot(index);
  }
  cache_[index] = CacheSlot{tensor.name, tensor.per_rank, true, ++use_clock_};
  cache_slot_of_[tensor.name] = index;
}

Status Negotiator::ExchangeBits(bool have_news, bool want_shutdown, bool want_eviction,
                                WaitKind wait, bool* anyone_has_news, bool* anyone_shuts_down,
                                bool* anyone_evicts, std::vector<int>* ready_slots,
                                std::vector<uint64_t>* broadcast) {
  // Word 0 holds the flags, then come the broadcast words, then the cache's
  // bits. The cache has the same number of slots on every rank, so the
  // vectors have the same length.
  const size_t first_bit_word = 1 + broadcast_words_;
  std::vector<uint64_t> words(first_bit_word + my_pending_bits_.size(), 0);
  words[0] = (have_news ? 0 : kNoNews) | (want_shutdown ? 0 : kNoShutdown) |
             (want_eviction ? 0 : kNoEviction);
  for (size_t i = 0; i < broadcast_words_; ++i) {
    words[1 + i] = rank_ == 0 ? broadcast_[i] : ~uint64_t{0};
  }
  // A joined rank waits on nothing: it agrees to every cached tensor, which
  // then runs when the ranks still training have announced it.
  if (joins_.has_joined(rank_)) {
    std::fill(words.begin() + first_bit_word, words.end(), ~uint64_t{0});
  } else {
    std::copy(my_pending_bits_.begin(), my_pending_bits_.end(),
              words.begin() + first_bit_word);
  }
  TFDIST_RETURN_IF_ERROR(control_plane_.AndAllreduce(words.data(), words.size(), wait));
  *anyone_has_news = !(words[0] & kNoNews);
  *anyone_shuts_down = !(words[0] & kNoShutdown);
  *anyone_evicts = !(words[0] & kNoEviction);
  broadcast->assign(words.begin() + 1, words.begin() + first_bit_word);
  for (size_t w = first_bit_word; w < words.size(); ++w) {
    for (uint64_t bits = words[w]; bits; bits &= bits - 1) {
      ready_slots->push_back(
          static_cast<int>((w - first_bit_word) * 64 + __builtin_ctzll(bits)));
    }
  }
  return Status::OK();
}

Status Negotiator::ExchangeAnnouncements(
    const std::vector<Announcement>& news, WaitKind wait,
    std::vector<std::vector<uint8_t>>* per_rank) {
  ByteWriter writer;
  for (const Announcement& a : news) {
    writer.PutString(a.name);
    WriteDescription(writer, a.description);
  }
  return control_plane_.Allgatherv(writer.bytes(), wait, per_rank);
}

namespace {

bool IsMemberOf(const std::string& name, const std::string& group) {
  if (name.size() <= group.size() + 1 || name.compare(0, group.size(), group) != 0 ||
      name[group.size()] != '.') {
    return false;
  }
  return name.find_first_not_of("0123456789", group.size() + 1) == std::string::npos;
}

}  // namespace

std::vector<std::string> Negotiator::Withdraw(const std::string& group) {
  std::vector<std::string> names;
  for (auto it = table_.begin(); it != table_.end();) {
    if (IsMemberOf(it->first, group)) {
      names.push_back(it->first);
      it = table_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = my_pending_cached_.begin(); it != my_pending_cached_.end();) {
    if (IsMemberOf(it->second.name, group)) {
      my_pending_bits_[it->first / 64] &= ~(uint64_t{1} << (it->first % 64));
      names.push_back(it->second.name);
      it = my_pending_cached_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = carry_over_.begin(); it != carry_over_.end();) {
    if (IsMemberOf(it->name, group)) {
      names.push_back(it->name);
      it = carry_over_.erase(it);
    } else {
      ++it;
    }
  }
  return names;
}

void Negotiator::AnnounceCachedInFull() {
  for (auto& [index, announcement] : my_pending_cached_) {
    my_pending_bits_[index / 64] &= ~(uint64_t{1} << (index % 64));
    carry_over_.push_back(std::move(announcement));
  }
  my_pending_cached_.clear();
}

std::vector<WaitingTensor> Negotiator::Waiting() const {
  std::vector<WaitingTensor> waiting;
  for (const auto& [name, entry] : table_) {
    WaitingTensor w{name, {}};
    for (int r = 0; r < size_; ++r) {
      if (!entry.seen[r] && !joins_.has_joined(r)) w.missing_ranks.push_back(r);
    }
    waiting.push_back(std::move(w));
  }
  return waiting;
}

}  // namespace tfdist
