// Element types and reduction operators understood by the core. The numeric
// values of DataType and ReduceOp are part of the C control API (cc/tf and the
// Python package pass them as integers), so never renumber them.
#ifndef TFDIST_CORE_BASE_DATA_TYPE_H_
#define TFDIST_CORE_BASE_DATA_TYPE_H_

#include <cstddef>
#include <string>

namespace tfdist {

enum class DataType : int {
  kUInt8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  kBool = 8,  // broadcast/allgather only: never reduced
};

// Average is not here: it is Sum followed by a postscale of 1/P, applied by
// the caller in double precision.
enum class ReduceOp : int {
  kSum = 0,
  kMin = 1,
  kMax = 2,
  kProduct = 3,
};

size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);
// True for the types the reduction kernels accept (everything but kBool).
bool IsReducible(DataType dtype);

}  // namespace tfdist

#endif  // TFDIST_CORE_BASE_DATA_TYPE_H_
