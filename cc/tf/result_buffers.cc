#include "cc/tf/result_buffers.h"

#include <cstdlib>

namespace tfdist {
namespace {

size_t Rounded(size_t bytes) {
  return (bytes + ResultBuffers::kAlignment - 1) / ResultBuffers::kAlignment *
         ResultBuffers::kAlignment;
}

}  // namespace

ResultBuffers& ResultBuffers::Shared() {
  static ResultBuffers* shared = new ResultBuffers();  // never destroyed: used at exit
  return *shared;
}

void* ResultBuffers::Take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto kept = free_.find(bytes);
    if (kept != free_.end() && !kept->second.empty()) {
      void* data = kept->second.back();
      kept->second.pop_back();
      if (kept->second.empty()) free_.erase(kept);  // no entry without a buffer
      kept_bytes_ -= bytes;
      return data;
    }
  }
  return std::aligned_alloc(kAlignment, Rounded(bytes));
}

void ResultBuffers::Keep(void* data, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto kept = free_.find(bytes);
    const size_t count = kept == free_.end() ? 0 : kept->second.size();
    if (count < kPerSize && kept_bytes_ + bytes <= kKeptBytes) {
      free_[bytes].push_back(data);
      kept_bytes_ += bytes;
      return;
    }
  }
  std::free(data);
}

void ResultBuffers::Release(void* data, size_t bytes, void* pool) {
  static_cast<ResultBuffers*>(pool)->Keep(data, bytes);
}

TensorPointer ResultBuffers::NewTensor(TF_DataType dtype, const std::vector<int64_t>& shape,
                                       size_t bytes) {
  void* data = Take(bytes);
  if (data == nullptr) return nullptr;
  // From here TensorFlow owns the buffer: it calls Release when done with it,
  // also when it cannot make the tensor.
  return TensorPointer(TF_NewTensor(dtype, shape.data(), static_cast<int>(shape.size()), data,
                                    bytes, &ResultBuffers::Release, this));
}

size_t ResultBuffers::KeptBuffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& [bytes, kept] : free_) count += kept.size();
  return count;
}

}  // namespace tfdist
