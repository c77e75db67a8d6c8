// TensorFlow's dtypes as the core's DataType: one table for the op kernels
// and the eager fast path, which reads a tensor's type through the C API
// (TF_DataType has the values of tensorflow::DataType).
#ifndef TFDIST_TF_DATA_TYPES_H_
#define TFDIST_TF_DATA_TYPES_H_

#include "cc/core/base/data_type.h"
#include "tensorflow/c/tf_datatype.h"

namespace tfdist {

// False for a type tfdist does not carry.
inline bool CoreTypeOf(TF_DataType dtype, DataType* out) {
  switch (dtype) {
    case TF_UINT8: *out = DataType::kUInt8; return true;
    case TF_INT8: *out = DataType::kInt8; return true;
    case TF_INT32: *out = DataType::kInt32; return true;
    case TF_INT64: *out = DataType::kInt64; return true;
    case TF_HALF: *out = DataType::kFloat16; return true;
    case TF_BFLOAT16: *out = DataType::kBFloat16; return true;
    case TF_FLOAT: *out = DataType::kFloat32; return true;
    case TF_DOUBLE: *out = DataType::kFloat64; return true;
    case TF_BOOL: *out = DataType::kBool; return true;
    default: return false;
  }
}

}  // namespace tfdist

#endif  // TFDIST_TF_DATA_TYPES_H_
