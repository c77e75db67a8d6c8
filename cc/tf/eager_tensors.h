// An EagerTensor's memory read, and a new EagerTensor made, from C: the
// eager fast path's input and result (eager_module.cc).
//
// Through Python, the fast path paid for both twice over: at 64 KiB, about
// 0.8 us for the input's NumPy view (EagerTensor._numpy) and 6 us for the
// result (a NumPy array, then EagerTensor's Python constructor, which copies
// an array that is not 64-byte aligned into TensorFlow's memory), out of a
// call of about 30 us. Here the input is read through its handle and the
// result (in result_buffers.h's memory) is written in place by the
// collective.
//
// TensorFlow's C API does the tensor work (TFE_TensorHandleResolve,
// TFE_NewTensorHandle). Reading a Python
// EagerTensor's handle, and wrapping a handle in a Python EagerTensor, have
// no public C entry: those two are the functions TensorFlow's own op dispatch
// uses, exported by its Python binding (lib_pywrap_tensorflow_common.so),
// found by name at run time. Where this TensorFlow lacks any of them, Get()
// says which, and the fast path keeps its Python route.
#ifndef TFDIST_TF_EAGER_TENSORS_H_
#define TFDIST_TF_EAGER_TENSORS_H_

#include <Python.h>

#include <memory>
#include <string>

#include "cc/tf/tensor_pointer.h"
#include "tensorflow/c/eager/c_api.h"
#include "tensorflow/c/tf_tensor.h"

namespace tfdist {

class EagerTensors {
 public:
  // The functions, resolved on the first call; nullptr where one is
  // missing, with its name in *missing (when given).
  static const EagerTensors* Get(std::string* missing = nullptr);

  // The tensor an EagerTensor holds, waiting for it to be computed (the same
  // memory, not a copy); nullptr with a Python exception set when `object` is
  // not an EagerTensor or TensorFlow cannot produce its value. Holds the GIL.
  TensorPointer Resolve(PyObject* object) const;
  // A new EagerTensor sharing `tensor`'s memory; nullptr with a Python
  // exception set. Holds the GIL.
  PyObject* Wrap(const TF_Tensor& tensor) const;

 private:
  EagerTensors() = default;

  TFE_TensorHandle* (*handle_of_)(const PyObject*) = nullptr;
  PyObject* (*from_handle_)(TFE_TensorHandle*, bool) = nullptr;
  TF_Tensor* (*resolve_)(TFE_TensorHandle*, TF_Status*) = nullptr;
  TFE_TensorHandle* (*new_handle_)(const TF_Tensor*, TF_Status*) = nullptr;
  void (*delete_handle_)(TFE_TensorHandle*) = nullptr;
  // Whether `object` is an EagerTensor (exactly or a subclass).
  PyObject* eager_tensor_type_ = nullptr;
};

}  // namespace tfdist

#endif  // TFDIST_TF_EAGER_TENSORS_H_
