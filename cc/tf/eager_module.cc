// The eager fast path's entry from Python: a CPython extension module,
// tfdist._eager_call, whose one function calls tfdist_eager_allreduce.
//
// The fast path used to call the C API through ctypes. ctypes converts each
// of the call's 13 arguments through its argtypes and the input's and
// result's addresses had to be read in Python first: 2 µs of a 10-15 µs call,
// where TensorFlow's own trivial op (the small-message yardstick) costs about
// 12. Here the arguments are read with the C API and the arrays' memory with
// the buffer protocol. The module lives in libtfdist.so itself (tfdist/_library.py
// loads that file as an extension module), so the library stays one file and
// the module is always the library's own version.
//
// allreduce_tensor goes further where this TensorFlow allows it
// (eager_tensors.h): it takes the EagerTensor itself and returns a new one,
// so that neither the input's NumPy view nor a result array and TensorFlow's
// Python constructor stand between the user and the collective.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cc/core/base/data_type.h"
#include "cc/tf/data_types.h"
#include "cc/tf/eager_tensors.h"
#include "cc/tf/result_buffers.h"

extern "C" int tfdist_eager_allreduce(const char* name, int dtype, const int64_t* shape,
                                      int ndims, const void* input, void* output,
                                      int reduce_op, double prescale, double postscale,
                                      int algorithm, int process_set, char* error,
                                      int error_length);

namespace {

constexpr int kErrorBytes = 4096;

// The memory of an object exporting a buffer (a NumPy array) or an int
// address (for arrays whose dtype the buffer protocol cannot describe, such as
// bfloat16); a view taken is released when this goes out of scope.
class HeldBuffer {
 public:
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }

  // False with a Python exception set when `object` is neither.
  bool Take(PyObject* object, bool writable, void** address) {
    if (PyLong_Check(object)) {
      *address = PyLong_AsVoidPtr(object);
      return !PyErr_Occurred();
    }
    if (PyObject_GetBuffer(object, &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
      return false;
    }
    held_ = true;
    *address = view_.buf;
    return true;
  }

  // Whether a view was taken and holds fewer than `bytes` (an int address
  // cannot be checked).
  bool Shorter(size_t bytes) const {
    return held_ && static_cast<size_t>(view_.len) < bytes;
  }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

bool ToInt(PyObject* object, int* value) {
  long converted = PyLong_AsLong(object);
  if (converted == -1 && PyErr_Occurred()) return false;
  *value = static_cast<int>(converted);
  return true;
}

// The arguments both entries take, in this order, after their tensors:
// reduce_op, prescale, postscale, algorithm, process_set.
struct Reduction {
  int reduce_op = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int algorithm = 0;
  int process_set = 0;
};

// Reads a Reduction from first[0..5); false with a Python exception set.
bool ReadReduction(PyObject* const* first, Reduction* r) {
  if (!ToInt(first[0], &r->reduce_op)) return false;
  r->prescale = PyFloat_AsDouble(first[1]);
  if (r->prescale == -1.0 && PyErr_Occurred()) return false;
  r->postscale = PyFloat_AsDouble(first[2]);
  if (r->postscale == -1.0 && PyErr_Occurred()) return false;
  return ToInt(first[3], &r->algorithm) && ToInt(first[4], &r->process_set);
}

// Runs the library's call with the GIL released: None, or (status code,
// message) when the collective failed.
PyObject* RunAllreduce(const char* name, int dtype, const std::vector<int64_t>& shape,
                       const void* input, void* output, const Reduction& r) {
  char error[kErrorBytes];
  error[0] = '\0';
  int code = 0;
  Py_BEGIN_ALLOW_THREADS
  code = tfdist_eager_allreduce(name, dtype, shape.data(), static_cast<int>(shape.size()),
                                input, output, r.reduce_op, r.prescale, r.postscale,
                                r.algorithm, r.process_set, error, kErrorBytes);
  Py_END_ALLOW_THREADS
  if (code == 0) Py_RETURN_NONE;
  return Py_BuildValue("(iN)", code, PyUnicode_DecodeUTF8(error, std::strlen(error), "replace"));
}

// allreduce(name: bytes, dtype: int, shape: tuple, input, output, reduce_op: int,
//           prescale: float, postscale: float, algorithm: int, process_set: int)
//   -> None, or (status code, message) when the collective failed.
// The GIL is released while the collective runs.
PyObject* EagerAllreduce(PyObject* /*module*/, PyObject* const* args, Py_ssize_t count) {
  if (count != 10) {
    PyErr_Format(PyExc_TypeError, "allreduce takes 10 arguments, got %zd", count);
    return nullptr;
  }
  const char* name = PyBytes_AsString(args[0]);
  if (name == nullptr) return nullptr;
  int dtype = 0;
  Reduction reduction;
  if (!ToInt(args[1], &dtype) || !ReadReduction(args + 5, &reduction)) return nullptr;
  if (!PyTuple_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "shape must be a tuple");
    return nullptr;
  }
  const Py_ssize_t ndims = PyTuple_GET_SIZE(args[2]);
  std::vector<int64_t> shape(static_cast<size_t>(ndims));
  for (Py_ssize_t i = 0; i < ndims; ++i) {
    shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], i));
    if (shape[i] == -1 && PyErr_Occurred()) return nullptr;
  }
  HeldBuffer input_view, output_view;
  void* input = nullptr;
  void* output = nullptr;
  if (!input_view.Take(args[3], /*writable=*/false, &input) ||
      !output_view.Take(args[4], /*writable=*/true, &output)) {
    return nullptr;
  }
  // The runtime reads and writes the whole tensor: arrays shorter than that
  // would be overrun. An unknown dtype is the runtime's to report.
  if (dtype >= 0 && dtype < static_cast<int>(tfdist::DataType::kBool)) {
    size_t bytes = tfdist::DataTypeSize(static_cast<tfdist::DataType>(dtype));
    for (int64_t dimension : shape) {
      if (dimension < 0) {
        PyErr_Format(PyExc_ValueError, "negative dimension %lld in the shape",
                     static_cast<long long>(dimension));
        return nullptr;
      }
      bytes *= static_cast<size_t>(dimension);
    }
    if (input_view.Shorter(bytes) || output_view.Shorter(bytes)) {
      PyErr_Format(PyExc_ValueError, "the arrays hold fewer than the tensor's %zu bytes",
                   bytes);
      return nullptr;
    }
  }
  return RunAllreduce(name, dtype, shape, input, output, reduction);
}

// allreduce_tensor(name: bytes, tensor: EagerTensor, reduce_op: int,
//                  prescale: float, postscale: float, algorithm: int,
//                  process_set: int, max_bytes: int)
//   -> a new EagerTensor holding the result; None when the tensor is not one
//      this call takes (a type that cannot be reduced, no bytes, more than
//      max_bytes), for the caller to take another path; (status code,
//      message) when the collective failed.
// Only where tensor_support() is None.
PyObject* EagerAllreduceTensor(PyObject* /*module*/, PyObject* const* args, Py_ssize_t count) {
  if (count != 8) {
    PyErr_Format(PyExc_TypeError, "allreduce_tensor takes 8 arguments, got %zd", count);
    return nullptr;
  }
  std::string missing;
  const tfdist::EagerTensors* tensors = tfdist::EagerTensors::Get(&missing);
  if (tensors == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "allreduce_tensor: this TensorFlow lacks %s",
                 missing.c_str());
    return nullptr;
  }
  const char* name = PyBytes_AsString(args[0]);
  if (name == nullptr) return nullptr;
  Reduction reduction;
  if (!ReadReduction(args + 2, &reduction)) return nullptr;
  const long long max_bytes = PyLong_AsLongLong(args[7]);
  if (max_bytes == -1 && PyErr_Occurred()) return nullptr;

  tfdist::TensorPointer input = tensors->Resolve(args[1]);
  if (input == nullptr) return nullptr;
  const TF_DataType tf_dtype = TF_TensorType(input.get());
  const size_t bytes = TF_TensorByteSize(input.get());
  tfdist::DataType dtype{};
  if (!tfdist::CoreTypeOf(tf_dtype, &dtype) || !tfdist::IsReducible(dtype) || bytes == 0 ||
      bytes > static_cast<unsigned long long>(std::max(max_bytes, 0LL))) {
    Py_RETURN_NONE;
  }
  std::vector<int64_t> shape(static_cast<size_t>(TF_NumDims(input.get())));
  for (size_t i = 0; i < shape.size(); ++i) shape[i] = TF_Dim(input.get(), static_cast<int>(i));
  tfdist::TensorPointer output =
      tfdist::ResultBuffers::Shared().NewTensor(tf_dtype, shape, bytes);
  if (output == nullptr) {
    PyErr_Format(PyExc_MemoryError, "tfdist: cannot allocate a result of %zu bytes", bytes);
    return nullptr;
  }
  PyObject* failed = RunAllreduce(name, static_cast<int>(dtype), shape,
                                  TF_TensorData(input.get()), TF_TensorData(output.get()),
                                  reduction);
  if (failed != Py_None) return failed;  // (code, message), or nullptr with an exception
  Py_DECREF(failed);
  return tensors->Wrap(*output);
}

// tensor_support() -> None where allreduce_tensor can be used, else what this
// TensorFlow lacks for it.
PyObject* TensorSupport(PyObject* /*module*/, PyObject* /*unused*/) {
  std::string missing;
  if (tfdist::EagerTensors::Get(&missing) != nullptr) Py_RETURN_NONE;
  return PyUnicode_FromString(missing.c_str());
}

// kept_result_buffers() -> the free result buffers the tensor route keeps
// (result_buffers.h), for the tests.
PyObject* KeptResultBuffers(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyLong_FromSize_t(tfdist::ResultBuffers::Shared().KeptBuffers());
}

PyMethodDef kMethods[] = {
    {"allreduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(EagerAllreduce)),
     METH_FASTCALL,
     "allreduce(name, dtype, shape, input, output, reduce_op, prescale, postscale, "
     "algorithm, process_set): None, or (code, message) on failure."},
    {"allreduce_tensor",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(EagerAllreduceTensor)),
     METH_FASTCALL,
     "allreduce_tensor(name, tensor, reduce_op, prescale, postscale, algorithm, process_set, "
     "max_bytes): a new EagerTensor; None where the tensor is not one it takes; (code, "
     "message) on failure."},
    {"tensor_support", TensorSupport, METH_NOARGS,
     "tensor_support(): None where allreduce_tensor can be used, else what is missing."},
    {"kept_result_buffers", KeptResultBuffers, METH_NOARGS,
     "kept_result_buffers(): the free result buffers the tensor route keeps."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "tfdist._eager_call",
    "The eager fast path's call into the runtime (cc/tf/eager_module.cc).", -1, kMethods,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__eager_call() {
  return PyModule_Create(&kModule);
}
