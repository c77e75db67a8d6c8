// Little helpers to put plain values and strings into a byte vector and read
// them back, for the negotiation messages. All ranks run the same binary on
// the same kind of machine, so values travel in native byte order.
#ifndef TFDIST_CORE_RUNTIME_WIRE_H_
#define TFDIST_CORE_RUNTIME_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace tfdist {

class ByteWriter {
 public:
  template <typename T>
  void Put(const T& value) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) Put(x);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads what ByteWriter wrote. Reading past the end sets failed() instead of
// touching memory it does not own.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T Get() {
    T value{};
    if (offset_ + sizeof(T) > size_) {
      failed_ = true;
      return value;
    }
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::string GetString() {
    const uint32_t n = Get<uint32_t>();
    if (failed_ || offset_ + n > size_) {
      failed_ = true;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(data_ + offset_), n);
    offset_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> GetVector() {
    const uint32_t n = Get<uint32_t>();
    std::vector<T> v;
    for (uint32_t i = 0; i < n && !failed_; ++i) v.push_back(Get<T>());
    return v;
  }
  bool done() const { return offset_ >= size_; }
  bool failed() const { return failed_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  bool failed_ = false;
};

}  // namespace tfdist

#endif  // TFDIST_CORE_RUNTIME_WIRE_H_
