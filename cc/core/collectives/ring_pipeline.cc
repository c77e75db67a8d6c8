#include "cc/core/collectives/ring_pipeline.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/convert.h"
#include "cc/core/collectives/thread_scratch.h"

namespace tfdist {
namespace {

int Modulo(int value, int modulus) {
  const int remainder = value % modulus;
  return remainder < 0 ? remainder + modulus : remainder;
}

// One segment of a chunk: where it lies, in one span.
struct Segment {
  unsigned char* data;
  const unsigned char* source;  // this rank's input, when out of place
  size_t bytes;
  size_t offset = 0;  // of `data` in the concatenation of the spans

  const unsigned char* input() const { return source != nullptr ? source : data; }
};

class RingRun {
 public:
  RingRun(Transport& transport, const std::vector<RingSpan>& spans,
          const RingSchedule& schedule)
      : transport_(transport),
        schedule_(schedule),
        size_(transport.size()),
        rank_(transport.rank()),
        right_((rank_ + 1) % size_),
        left_((rank_ - 1 + size_) % size_),
        total_steps_(schedule.reduce_steps + schedule.copy_steps),
        sends_by_step_(total_steps_ + 1) {
    const size_t element_size = std::max<size_t>(schedule.element_size, 1);
    const size_t segment_bytes =
        std::max<size_t>(schedule.max_segment_bytes / element_size, 1) * element_size;
    CutSegments(spans, segment_bytes);
  }

  Status Run() {
    if (total_steps_ == 0) return Status::OK();
    if (schedule_.reduce_steps > 0) {
      size_t slot_bytes = 0;
      for (const std::vector<Segment>& chunk : segments_) {
        for (const Segment& segment : chunk) slot_bytes = std::max(slot_bytes, segment.bytes);
      }
      slots_[0] = ThreadScratch(2 * slot_bytes);
      slots_[1] = slots_[0] + slot_bytes;
    }

    // Step 0 sends this rank's own (unreduced) chunk.
    for (const Segment& segment : segments_[SentChunk(0)]) {
      if (compressed()) Narrow(segment, 0, segment.bytes);
      sends_by_step_[0].push_back(transport_.StartSend(
          right_, compressed() ? segment.data : segment.input(), segment.bytes,
          schedule_.tag));
    }

    Status result;
    for (int step = 0; step < total_steps_ && result.ok(); ++step) {
      result = step < schedule_.reduce_steps ? ReduceStep(step) : CopyStep(step);
    }
    // Even after a failure, every started send is finished before returning,
    // so the caller may free the buffer.
    for (int step = 0; step <= total_steps_; ++step) {
      Status status = WaitForSends(step);
      if (result.ok()) result = status;
    }
    return result;
  }

 private:
  bool compressed() const { return schedule_.full_source != nullptr; }

  // Wire compression (RingSchedule::full_source): where byte `wire_offset`
  // of the wire buffer lies in the full-width tensor.
  size_t FullOffset(size_t wire_offset) const {
    return wire_offset / schedule_.element_size * DataTypeSize(schedule_.full_dtype);
  }

  // This rank's input for bytes [done, done + bytes) of `segment`, rounded
  // to the wire type into the buffer.
  void Narrow(const Segment& segment, size_t done, size_t bytes) const {
    ConvertScaled(schedule_.full_source + FullOffset(segment.offset + done),
                  schedule_.full_dtype, segment.data + done, schedule_.dtype,
                  bytes / schedule_.element_size, schedule_.source_scale);
  }

  // The final result for those bytes, widened into the full-width output.
  void Widen(const Segment& segment, size_t done, size_t bytes) const {
    ConvertScaled(segment.data + done, schedule_.dtype,
                  schedule_.full_result + FullOffset(segment.offset + done),
                  schedule_.full_dtype, bytes / schedule_.element_size, 1.0);
  }

  int SentChunk(int step) const {
    return Modulo(rank_ + schedule_.shift - step, size_);
  }
  int ReceivedChunk(int step) const { return SentChunk(step + 1); }

  // Cuts every chunk into segments of at most `segment_bytes`, also cut at
  // span ends; the cuts depend only on sizes, so they agree on every rank.
  void CutSegments(const std::vector<RingSpan>& spans, size_t segment_bytes) {
    segments_.resize(size_);
    size_t span = 0;
    size_t span_begin = 0;  // offset of spans[span] in the concatenation
    for (int chunk = 0; chunk < size_; ++chunk) {
      size_t offset = schedule_.chunk_offsets[chunk];
      const size_t end = schedule_.chunk_offsets[chunk + 1];
      while (offset < end) {
        while (offset >= span_begin + spans[span].bytes) span_begin += spans[span++].bytes;
        const RingSpan& s = spans[span];
        const size_t within = offset - span_begin;
        const size_t bytes = std::min({segment_bytes, end - offset, s.bytes - within});
        segments_[chunk].push_back(
            {s.data + within, s.source != nullptr ? s.source + within : nullptr, bytes, offset});
        offset += bytes;
      }
    }
  }

  // A segment finished in step `step - 1` is sent in step `step`; the last
  // step's segments go nowhere.
  void ForwardSegment(int step, const Segment& segment) {
    if (step >= total_steps_) return;
    sends_by_step_[step].push_back(
        transport_.StartSend(right_, segment.data, segment.bytes, schedule_.tag));
  }

  Status WaitForSends(int step) {
    Status result;
    for (auto& send : sends_by_step_[step]) {
      Status status = send->Wait();
      if (result.ok()) result = status;
    }
    sends_by_step_[step].clear();
    return result;
  }

  // A chunk about to be overwritten may still be the source of a send from
  // an earlier step (the same chunk index comes round every P steps).
  Status WaitForSendsReading(int chunk, int step) {
    for (int earlier = step; earlier >= 0; --earlier) {
      if (SentChunk(earlier) == chunk) {
        TFDIST_RETURN_IF_ERROR(WaitForSends(earlier));
      }
    }
    return Status::OK();
  }

  Status ReduceStep(int step) {
    const int chunk = ReceivedChunk(step);
    TFDIST_RETURN_IF_ERROR(WaitForSendsReading(chunk, step));
    const bool last_step = step + 1 == schedule_.reduce_steps;
    return ReceiveSegments(segments_[chunk],
                           [&](const Segment& segment, const unsigned char* slot) {
                             ReduceSegment(segment, slot, last_step);
                             ForwardSegment(step + 1, segment);
                           });
  }

  // Receives `segments` from the left neighbour into the two slots in turn and
  // calls use(segment, slot) on each as it arrives: segment k+1 is in flight
  // into the other slot while segment k is used.
  template <typename Use>
  Status ReceiveSegments(const std::vector<Segment>& segments, Use&& use) {
    std::unique_ptr<PendingOp> receives[2];
    auto post_receive = [&](size_t k) {
      receives[k % 2] =
          transport_.StartRecv(left_, slots_[k % 2], segments[k].bytes, schedule_.tag);
    };
    for (size_t k = 0; k < std::min<size_t>(segments.size(), 2); ++k) post_receive(k);
    for (size_t k = 0; k < segments.size(); ++k) {
      TFDIST_RETURN_IF_ERROR(receives[k % 2]->Wait());
      use(segments[k], slots_[k % 2]);
      if (k + 2 < segments.size()) post_receive(k + 2);
    }
    return Status::OK();
  }

  // Reduces what arrived for `segment` into the buffer (first copying this
  // rank's input in, out of place) and, after the last reduce step, scales
  // it as it reduces. Done in cache-sized blocks, so each block is read from
  // memory once rather than once per pass.
  void ReduceSegment(const Segment& segment, const unsigned char* incoming, bool last_step) {
    constexpr size_t kBlockBytes = size_t{64} << 10;
    const size_t element_size = schedule_.element_size;
    const size_t block = std::max<size_t>(kBlockBytes / element_size, 1) * element_size;
    const bool scale = last_step && schedule_.result_scale != 1.0;
    for (size_t done = 0; done < segment.bytes; done += block) {
      const size_t bytes = std::min(block, segment.bytes - done);
      unsigned char* out = segment.data + done;
      if (segment.source != nullptr) std::memcpy(out, segment.source + done, bytes);
      if (compressed()) Narrow(segment, done, bytes);
      ReduceIntoScaled(out, incoming + done, bytes / element_size, schedule_.dtype,
                       schedule_.op, scale ? schedule_.result_scale : 1.0);
      if (compressed() && last_step && schedule_.copy_steps > 0) Widen(segment, done, bytes);
    }
  }

  // The last step of a compressed ring forwards nothing: each segment can
  // arrive in a cache-resident slot and be widened from there, rather than
  // be written to the wire buffer and read back.
  Status WidenLastStep(const std::vector<Segment>& segments) {
    return ReceiveSegments(segments, [&](const Segment& segment, const unsigned char* slot) {
      ConvertScaled(slot, schedule_.dtype, schedule_.full_result + FullOffset(segment.offset),
                    schedule_.full_dtype, segment.bytes / schedule_.element_size, 1.0);
    });
  }

  Status CopyStep(int step) {
    const int chunk = ReceivedChunk(step);
    TFDIST_RETURN_IF_ERROR(WaitForSendsReading(chunk, step));
    const std::vector<Segment>& segments = segments_[chunk];
    if (compressed() && step + 1 == total_steps_ && schedule_.reduce_steps > 0) {
      return WidenLastStep(segments);
    }
    // Received straight into place, so every segment can be in flight.
    std::vector<std::unique_ptr<PendingOp>> receives;
    receives.reserve(segments.size());
    for (const Segment& segment : segments) {
      receives.push_back(
          transport_.StartRecv(left_, segment.data, segment.bytes, schedule_.tag));
    }
    for (size_t k = 0; k < segments.size(); ++k) {
      TFDIST_RETURN_IF_ERROR(receives[k]->Wait());
      ForwardSegment(step + 1, segments[k]);
      if (compressed()) Widen(segments[k], 0, segments[k].bytes);
    }
    return Status::OK();
  }

  Transport& transport_;
  const RingSchedule& schedule_;
  const int size_;
  const int rank_;
  const int right_;
  const int left_;
  const int total_steps_;
  std::vector<std::vector<Segment>> segments_;  // per chunk, in order
  unsigned char* slots_[2] = {nullptr, nullptr};
  // Sends started for step s, kept until the chunk they read is overwritten
  // or the run ends. Index total_steps_ stays empty (nothing is forwarded
  // past the last step) and only keeps the indexing simple.
  std::vector<std::vector<std::unique_ptr<PendingOp>>> sends_by_step_;
};

}  // namespace

Status RunRingSchedule(Transport& transport, void* buffer,
                       const RingSchedule& schedule) {
  const size_t total = schedule.chunk_offsets.empty() ? 0 : schedule.chunk_offsets.back();
  return RunRingSchedule(
      transport, {RingSpan{total, static_cast<unsigned char*>(buffer), nullptr}},
      schedule);
}

Status RunRingSchedule(Transport& transport, const std::vector<RingSpan>& spans,
                       const RingSchedule& schedule) {
  if (transport.size() == 1) return Status::OK();
  if (static_cast<int>(schedule.chunk_offsets.size()) != transport.size() + 1) {
    return Status::InvalidArgument("ring schedule needs one chunk per rank");
  }
  size_t total = 0;
  for (const RingSpan& span : spans) {
    if (span.bytes % std::max<size_t>(schedule.element_size, 1) != 0) {
      return Status::InvalidArgument("ring span is not a whole number of elements");
    }
    total += span.bytes;
  }
  if (schedule.chunk_offsets.back() != total || schedule.chunk_offsets.front() != 0) {
    return Status::InvalidArgument("ring chunks do not cover the spans");
  }
  if (schedule.full_source != nullptr &&
      (spans.size() != 1 || schedule.full_result == nullptr || spans[0].source != nullptr)) {
    return Status::InvalidArgument("a compressed ring runs on one wire buffer, in place");
  }
  RingRun run(transport, spans, schedule);
  return run.Run();
}

}  // namespace tfdist
