// The memory of the eager tensor route's results: 64-byte aligned buffers,
// kept per size once TensorFlow frees the tensor that used one, and handed
// out again.
//
// A result allocated and freed on every call was, in some jobs, handed back
// to the kernel by glibc at each free and faulted in again at the next call
// (one page fault per call at 256 KiB to 1 MiB: docs/cost_model.md,
// "Balanced rounds"). A buffer kept here is never returned to glibc while
// it is being reused. TensorFlow calls Release when the last tensor sharing
// a buffer is gone, from whichever thread drops it.
#ifndef TFDIST_TF_RESULT_BUFFERS_H_
#define TFDIST_TF_RESULT_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "cc/tf/tensor_pointer.h"
#include "tensorflow/c/tf_datatype.h"

namespace tfdist {

class ResultBuffers {
 public:
  // Free buffers kept per size, and bytes in all; beyond either, a freed
  // buffer goes back to the system (first come, first kept: a job's sizes
  // repeat, and the cap holds 16 sizes of 1 MiB twice over). Two per size:
  // `x = allreduce(x)` holds the previous result while the next call takes a
  // buffer.
  static constexpr size_t kPerSize = 2;
  static constexpr size_t kKeptBytes = 32u << 20;
  // TensorFlow's alignment for a tensor that uses memory as it is
  // (EIGEN_MAX_ALIGN_BYTES at most); an unaligned buffer would be copied.
  static constexpr size_t kAlignment = 64;

  // The process's pool: never destroyed, since tensors may be freed during
  // exit, after static objects are gone.
  static ResultBuffers& Shared();

  // A new tensor of `dtype` and `shape` (`bytes` > 0) over a kept buffer of
  // that size, or a new one; nullptr when memory runs out.
  TensorPointer NewTensor(TF_DataType dtype, const std::vector<int64_t>& shape, size_t bytes);

  // Free buffers held now, for the tests.
  size_t KeptBuffers() const;

 private:
  ResultBuffers() = default;
  void* Take(size_t bytes);
  void Keep(void* data, size_t bytes);
  // TF_NewTensor's deallocator; `pool` is the ResultBuffers.
  static void Release(void* data, size_t bytes, void* pool);

  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;  // by size, the newest last
  size_t kept_bytes_ = 0;
};

}  // namespace tfdist

#endif  // TFDIST_TF_RESULT_BUFFERS_H_
