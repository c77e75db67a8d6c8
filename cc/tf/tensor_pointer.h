// A TF_Tensor owned in C++: it holds a reference to its memory until deleted.
#ifndef TFDIST_TF_TENSOR_POINTER_H_
#define TFDIST_TF_TENSOR_POINTER_H_

#include <memory>

#include "tensorflow/c/tf_tensor.h"

namespace tfdist {

struct TensorDeleter {
  void operator()(TF_Tensor* tensor) const { TF_DeleteTensor(tensor); }
};
using TensorPointer = std::unique_ptr<TF_Tensor, TensorDeleter>;

}  // namespace tfdist

#endif  // TFDIST_TF_TENSOR_POINTER_H_
