// C API through which tfdist.runtime.rank_state() / restore_rank_state()
// copy the compressors' per-rank state (cc/core/compression/state_store.h)
// out of and back into the runtime, for checkpoints. Every function returns
// -1 when tfdist is not initialized.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cc/tf/c_api_status.h"
#include "cc/tf/runtime_handle.h"

namespace {

std::shared_ptr<tfdist::StateStore> Store() {
  return tfdist::CurrentRuntime().compression_state;
}

}  // namespace

extern "C" {

// Writes the names of every state array, each followed by '\0', into
// `names` (up to `capacity` bytes); returns the bytes needed.
int64_t tfdist_state_names(char* names, int64_t capacity) {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  std::string joined;
  for (const std::string& name : store->Names()) {
    joined += name;
    joined.push_back('\0');
  }
  if (static_cast<int64_t>(joined.size()) <= capacity) {
    std::memcpy(names, joined.data(), joined.size());
  }
  return static_cast<int64_t>(joined.size());
}

// Describes array `name`: dtype (DataType code), rank, dimensions and byte
// size. Returns 0; 1 when there is no such array; 2 when it has more than
// `max_dims` dimensions: then only `*dims` is set, and the caller asks again
// with room for that many (a shape is never cut short, so a caller never
// sizes a buffer from part of one).
int tfdist_state_describe(const char* name, int* dtype, int* dims, int64_t* shape,
                          int max_dims, int64_t* bytes) {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  std::shared_ptr<tfdist::StateArray> array = store->Find(name);
  if (!array) return 1;
  std::lock_guard<std::mutex> lock(array->mutex);
  *dims = static_cast<int>(array->shape.size());
  if (*dims > max_dims) return 2;
  *dtype = static_cast<int>(array->dtype);
  for (int i = 0; i < *dims; ++i) shape[i] = array->shape[i];
  *bytes = static_cast<int64_t>(array->data.size());
  return 0;
}

// Copies array `name` into `out` (`bytes` long, as described). Returns 0,
// 1 when there is no such array or its size changed.
int tfdist_state_read(const char* name, void* out, int64_t bytes) {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  std::shared_ptr<tfdist::StateArray> array = store->Find(name);
  if (!array) return 1;
  std::lock_guard<std::mutex> lock(array->mutex);
  if (static_cast<int64_t>(array->data.size()) != bytes) return 1;
  if (bytes > 0) std::memcpy(out, array->data.data(), static_cast<size_t>(bytes));
  return 0;
}

// Drops every state array.
int tfdist_state_clear() {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  store->Clear();
  return 0;
}

// Sets array `name`. Returns 0, or a StatusCode with the message in `error`.
int tfdist_state_write(const char* name, int dtype, const int64_t* shape, int dims,
                       const void* data, int64_t bytes, char* error, int error_length) {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  if (dtype < 0 || dtype > static_cast<int>(tfdist::DataType::kBool)) {
    return tfdist::ReportStatus(
        tfdist::Status::InvalidArgument("unknown dtype code " + std::to_string(dtype)), error,
        error_length);
  }
  const std::vector<int64_t> dimensions(shape, shape + dims);
  return tfdist::ReportStatus(store->Put(name, static_cast<tfdist::DataType>(dtype), dimensions,
                                         data, static_cast<size_t>(bytes)),
                              error, error_length);
}

// Replaces the whole state with `count` arrays, all or nothing: array i is
// names[i], dtypes[i], dims[i] dimensions taken in turn from `shapes`, and
// bytes[i] bytes at data[i]. Returns 0, or a StatusCode with the message in
// `error` and the state unchanged.
int tfdist_state_replace(int count, const char* const* names, const int* dtypes,
                         const int* dims, const int64_t* shapes, const void* const* data,
                         const int64_t* bytes, char* error, int error_length) {
  std::shared_ptr<tfdist::StateStore> store = Store();
  if (!store) return -1;
  std::vector<tfdist::StateStore::Entry> entries(count > 0 ? count : 0);
  size_t offset = 0;
  for (int i = 0; i < count; ++i) {
    if (dims[i] < 0 || bytes[i] < 0) {
      return tfdist::ReportStatus(
          tfdist::Status::InvalidArgument(std::string("state '") + names[i] +
                                          "': negative rank or byte count"),
          error, error_length);
    }
    tfdist::StateStore::Entry& entry = entries[i];
    entry.name = names[i];
    entry.dtype = static_cast<tfdist::DataType>(dtypes[i]);
    entry.shape.assign(shapes + offset, shapes + offset + dims[i]);
    offset += static_cast<size_t>(dims[i]);
    entry.bytes = data[i];
    entry.byte_count = static_cast<size_t>(bytes[i]);
  }
  return tfdist::ReportStatus(store->ReplaceAll(entries), error, error_length);
}

}  // extern "C"
