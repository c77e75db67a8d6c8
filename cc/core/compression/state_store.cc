#include "cc/core/compression/state_store.h"

#include <cstring>

namespace tfdist {

namespace {

size_t Elements(const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t d : shape) count *= static_cast<size_t>(d);
  return count;
}

}  // namespace

size_t StateArray::elements() const { return Elements(shape); }

std::shared_ptr<StateArray> StateStore::GetOrCreate(const std::string& name, DataType dtype,
                                                    const std::vector<int64_t>& shape,
                                                    bool* created) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<StateArray>& slot = arrays_[name];
  bool made = false;
  if (slot == nullptr) {
    slot = std::make_shared<StateArray>();
    made = true;
  }
  {
    std::lock_guard<std::mutex> array_lock(slot->mutex);
    if (made || slot->dtype != dtype || slot->shape != shape) {
      slot->dtype = dtype;
      slot->shape = shape;
      slot->data.assign(Elements(shape) * DataTypeSize(dtype), 0);
      made = true;
    }
  }
  if (created != nullptr) *created = made;
  return slot;
}

std::shared_ptr<StateArray> StateStore::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = arrays_.find(name);
  return it == arrays_.end() ? nullptr : it->second;
}

void StateStore::Erase(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_.erase(name);
}

std::vector<std::string> StateStore::Names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (const auto& entry : arrays_) names.push_back(entry.first);
  return names;
}

namespace {

// The array `entry` describes, or InvalidArgument naming it.
Status MakeArray(const StateStore::Entry& entry, std::shared_ptr<StateArray>* out) {
  const std::string& name = entry.name;
  const int code = static_cast<int>(entry.dtype);
  if (code < 0 || code > static_cast<int>(DataType::kBool) || DataTypeSize(entry.dtype) == 0) {
    return Status::InvalidArgument("state '" + name + "': unknown dtype code " +
                                   std::to_string(code));
  }
  for (int64_t d : entry.shape) {
    if (d < 0) return Status::InvalidArgument("state '" + name + "': negative dimension");
  }
  const size_t expected = Elements(entry.shape) * DataTypeSize(entry.dtype);
  if (entry.byte_count != expected) {
    return Status::InvalidArgument("state '" + name + "': " + std::to_string(entry.byte_count) +
                                   " bytes given, " + std::to_string(expected) +
                                   " expected for its dtype and shape");
  }
  if (entry.byte_count > 0 && entry.bytes == nullptr) {
    return Status::InvalidArgument("state '" + name + "': no data");
  }
  auto array = std::make_shared<StateArray>();
  array->dtype = entry.dtype;
  array->shape = entry.shape;
  array->data.resize(entry.byte_count);
  if (entry.byte_count > 0) std::memcpy(array->data.data(), entry.bytes, entry.byte_count);
  *out = std::move(array);
  return Status::OK();
}

}  // namespace

Status StateStore::Put(const std::string& name, DataType dtype,
                       const std::vector<int64_t>& shape, const void* bytes,
                       size_t byte_count) {
  std::shared_ptr<StateArray> array;
  TFDIST_RETURN_IF_ERROR(MakeArray(Entry{name, dtype, shape, bytes, byte_count}, &array));
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_[name] = std::move(array);
  return Status::OK();
}

Status StateStore::ReplaceAll(const std::vector<Entry>& entries) {
  std::map<std::string, std::shared_ptr<StateArray>> replacement;
  for (const Entry& entry : entries) {
    if (entry.name.empty()) return Status::InvalidArgument("state: an entry has an empty name");
    std::shared_ptr<StateArray> array;
    TFDIST_RETURN_IF_ERROR(MakeArray(entry, &array));
    if (!replacement.emplace(entry.name, std::move(array)).second) {
      return Status::InvalidArgument("state '" + entry.name + "' is given twice");
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_.swap(replacement);
  return Status::OK();
}

void StateStore::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_.clear();
}

}  // namespace tfdist
