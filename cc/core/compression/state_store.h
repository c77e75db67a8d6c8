// The per-rank state of the lossy compressors: error-feedback residuals,
// PowerSGD's warm-start factors and step counters, keyed by a stable name
// ("topk.residual/<tensor name>", ...). One store per runtime, reached by
// the TF kernels through the runtime handle and by Python (checkpoints)
// through a C API, so that it can be saved and restored as per-rank state.
#ifndef TFDIST_CORE_COMPRESSION_STATE_STORE_H_
#define TFDIST_CORE_COMPRESSION_STATE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/core/base/status.h"

namespace tfdist {

// One array. Its own mutex lets kernels working on different tensors run
// concurrently; hold it (through StateStore::Lock) while reading or
// writing `data`.
struct StateArray {
  std::mutex mutex;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;

  size_t elements() const;
  float* floats() { return reinterpret_cast<float*>(data.data()); }
  int64_t* int64s() { return reinterpret_cast<int64_t*>(data.data()); }
};

class StateStore {
 public:
  // The array called `name`, created zero-filled when missing, and reset
  // to zeros when it exists with another dtype or shape (the name now
  // belongs to a different tensor, and its old state means nothing for it).
  // `*created` says whether it was (re)made. The caller locks its mutex.
  std::shared_ptr<StateArray> GetOrCreate(const std::string& name, DataType dtype,
                                          const std::vector<int64_t>& shape,
                                          bool* created = nullptr);
  // The array called `name`, or null.
  std::shared_ptr<StateArray> Find(const std::string& name) const;
  void Erase(const std::string& name);

  // Names in sorted order.
  std::vector<std::string> Names() const;
  // Replaces (or adds) `name` with a copy of `bytes`; InvalidArgument when
  // the byte count does not match dtype and shape.
  Status Put(const std::string& name, DataType dtype, const std::vector<int64_t>& shape,
             const void* bytes, size_t byte_count);
  void Clear();

  // One array of a whole new state (ReplaceAll).
  struct Entry {
    std::string name;
    DataType dtype = DataType::kFloat32;
    std::vector<int64_t> shape;
    const void* bytes = nullptr;
    size_t byte_count = 0;
  };
  // Replaces the whole state with `entries`, all or nothing: every entry is
  // checked (dtype, shape, byte count, names unique and not empty) and
  // copied before the store changes, so an InvalidArgument naming the bad
  // entry leaves the state as it was, never half restored.
  Status ReplaceAll(const std::vector<Entry>& entries);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<StateArray>> arrays_;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_COMPRESSION_STATE_STORE_H_
