#include "cc/tests/test_data.h"

#include <chrono>
#include <cstring>

#include "cc/core/numeric/reduction.h"
#include "cc/core/numeric/half.h"
#include "cc/tests/test_harness.h"

namespace tfdist_test {

using tfdist::DataType;
using tfdist::ReduceOp;

const std::vector<int>& SweepGroupSizes() {
  static const std::vector<int> sizes =
      kUnderThreadSanitizer ? std::vector<int>{1, 2, 3, 4, 5, 7, 8}
                            : std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16};
  return sizes;
}

const std::vector<DataType>& ReducibleDataTypes() {
  static const std::vector<DataType> dtypes = {
      DataType::kUInt8,   DataType::kInt8,     DataType::kInt32,
      DataType::kInt64,   DataType::kFloat16,  DataType::kBFloat16,
      DataType::kFloat32, DataType::kFloat64};
  return dtypes;
}

const std::vector<ReduceOp>& AllReduceOps() {
  static const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMin,
                                            ReduceOp::kMax, ReduceOp::kProduct};
  return ops;
}

namespace {

template <typename T>
void StoreAs(T value, void* element) {
  std::memcpy(element, &value, sizeof(T));
}

// The integer each test element holds before conversion to its dtype.
int64_t ElementValue(ReduceOp op, int rank, int size, size_t index) {
  const int64_t i = static_cast<int64_t>(index);
  switch (op) {
    case ReduceOp::kSum:
      return (rank * 131 + i * 7) % 11 - 5;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return (rank * 37 + i * 11 + (i >> 3)) % 101 - 50;
    case ReduceOp::kProduct: {
      const int64_t sign = (rank + i) % 3 == 0 ? -1 : 1;
      return sign * (i % size == rank ? 2 : 1);
    }
  }
  return 0;
}

}  // namespace

void StoreInteger(DataType dtype, int64_t value, void* element) {
  switch (dtype) {
    case DataType::kUInt8: return StoreAs(static_cast<uint8_t>(value), element);
    case DataType::kInt8: return StoreAs(static_cast<int8_t>(value), element);
    case DataType::kInt32: return StoreAs(static_cast<int32_t>(value), element);
    case DataType::kInt64: return StoreAs(static_cast<int64_t>(value), element);
    case DataType::kFloat16:
      return StoreAs(tfdist::FloatToHalf(static_cast<float>(value)), element);
    case DataType::kBFloat16:
      return StoreAs(tfdist::FloatToBFloat16(static_cast<float>(value)), element);
    case DataType::kFloat32: return StoreAs(static_cast<float>(value), element);
    case DataType::kFloat64: return StoreAs(static_cast<double>(value), element);
    case DataType::kBool: return StoreAs(static_cast<uint8_t>(value != 0), element);
  }
}

Bytes MakeRankInput(DataType dtype, ReduceOp op, int rank, int size,
                    size_t count) {
  const size_t element_size = tfdist::DataTypeSize(dtype);
  Bytes input(count * element_size);
  for (size_t i = 0; i < count; ++i) {
    StoreInteger(dtype, ElementValue(op, rank, size, i),
                 input.data() + i * element_size);
  }
  return input;
}

Bytes SequentialReduce(const std::vector<Bytes>& inputs, size_t count,
                       DataType dtype, ReduceOp op) {
  Bytes result = inputs.at(0);
  for (size_t rank = 1; rank < inputs.size(); ++rank) {
    tfdist::ReduceInto(result.data(), inputs[rank].data(), count, dtype, op);
  }
  return result;
}

Bytes PatternBlock(int a, int b, size_t bytes) {
  Bytes block(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    block[i] = static_cast<unsigned char>(a * 59 + b * 13 + i * 7 + (i >> 8));
  }
  return block;
}

long long FirstMismatch(const Bytes& actual, const Bytes& expected,
                        size_t element_size) {
  if (actual.size() != expected.size()) return 0;
  // memcmp wants valid pointers even for zero bytes; an empty vector has none.
  if (actual.empty() || std::memcmp(actual.data(), expected.data(), actual.size()) == 0) {
    return -1;
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) return static_cast<long long>(i / element_size);
  }
  return -1;
}

tfdist::InProcessFabricOptions FabricOptions(tfdist::InProcessSendMode mode) {
  tfdist::InProcessFabricOptions options;
  options.send_mode = mode;
  options.wait_timeout = std::chrono::seconds(30);
  return options;
}

const char* SendModeName(tfdist::InProcessSendMode mode) {
  return mode == tfdist::InProcessSendMode::kBuffered ? "buffered" : "rendezvous";
}

}  // namespace tfdist_test
