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

Status StateStore::Put(const std::string& name, DataType dtype,
                       const std::vector<int64_t>& shape, const void* bytes,
                       size_t byte_count) {
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument("state '" + name + "': negative dimension");
  }
  const size_t expected = Elements(shape) * DataTypeSize(dtype);
  if (byte_count != expected) {
    return Status::InvalidArgument("state '" + name + "': " + std::to_string(byte_count) +
                                   " bytes given, " + std::to_string(expected) +
                                   " expected for its dtype and shape");
  }
  auto array = std::make_shared<StateArray>();
  array->dtype = dtype;
  array->shape = shape;
  array->data.resize(byte_count);
  if (byte_count > 0) std::memcpy(array->data.data(), bytes, byte_count);
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_[name] = std::move(array);
  return Status::OK();
}

void StateStore::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  arrays_.clear();
}

}  // namespace tfdist
