#include "cc/tf/eager_tensors.h"

#include <dlfcn.h>

#include <mutex>

#include "tensorflow/c/tf_status.h"

namespace tfdist {
namespace {

// TensorFlow's Python binding and its C++ library, already loaded by
// `import tensorflow` (found by soname; never loaded from here).
constexpr char kPythonBinding[] = "lib_pywrap_tensorflow_common.so";
constexpr char kTensorFlowLibrary[] = "libtensorflow_cc.so.2";

struct StatusDeleter {
  void operator()(TF_Status* status) const { TF_DeleteStatus(status); }
};
using StatusPointer = std::unique_ptr<TF_Status, StatusDeleter>;

// The already loaded library's handle, kept for the process's life (dlclose
// would only drop the reference taken here).
void* Loaded(const char* soname) { return dlopen(soname, RTLD_LAZY | RTLD_NOLOAD); }

template <typename Function>
bool Find(void* library, const char* symbol, Function* function, std::string* missing) {
  void* address = library == nullptr ? nullptr : dlsym(library, symbol);
  if (address == nullptr) {
    if (missing->empty()) *missing = symbol;
    return false;
  }
  *function = reinterpret_cast<Function>(address);
  return true;
}

void SetPythonError(const char* what, const TF_Status& status) {
  PyErr_Format(PyExc_RuntimeError, "tfdist: %s: %s", what, TF_Message(&status));
}

}  // namespace

const EagerTensors* EagerTensors::Get(std::string* missing) {
  static std::once_flag once;
  static EagerTensors found;
  static bool complete = false;
  static std::string first_missing;
  std::call_once(once, [] {
    void* binding = Loaded(kPythonBinding);
    void* library = Loaded(kTensorFlowLibrary);
    if (binding == nullptr) first_missing = kPythonBinding;
    if (library == nullptr && first_missing.empty()) first_missing = kTensorFlowLibrary;
    PyTypeObject** type = nullptr;
    // The C++ names of EagerTensor_Handle(const PyObject*) and
    // EagerTensorFromHandle(TFE_TensorHandle*, bool) (pywrap_tfe.h).
    bool all = Find(binding, "_Z18EagerTensor_HandlePK7_object", &found.handle_of_,
                    &first_missing);
    all = Find(binding, "_Z21EagerTensorFromHandleP16TFE_TensorHandleb",
               &found.from_handle_, &first_missing) && all;
    all = Find(binding, "EagerTensorType", &type, &first_missing) && all;
    all = Find(library, "TFE_TensorHandleResolve", &found.resolve_, &first_missing) && all;
    all = Find(library, "TFE_NewTensorHandle", &found.new_handle_, &first_missing) && all;
    all = Find(library, "TFE_DeleteTensorHandle", &found.delete_handle_, &first_missing) &&
          all;
    if (all && *type == nullptr) {
      first_missing = "EagerTensorType (not set up)";
      all = false;
    }
    if (!all) return;
    found.eager_tensor_type_ = reinterpret_cast<PyObject*>(*type);
    complete = true;
  });
  if (!complete && missing != nullptr) *missing = first_missing;
  return complete ? &found : nullptr;
}

TensorPointer EagerTensors::Resolve(PyObject* object) const {
  if (!PyObject_TypeCheck(object, reinterpret_cast<PyTypeObject*>(eager_tensor_type_))) {
    PyErr_Format(PyExc_TypeError, "tfdist: expected an EagerTensor, got %s",
                 Py_TYPE(object)->tp_name);
    return nullptr;
  }
  StatusPointer status(TF_NewStatus());
  TensorPointer tensor(resolve_(handle_of_(object), status.get()));
  if (TF_GetCode(status.get()) != TF_OK) {
    SetPythonError("reading the tensor", *status);
    return nullptr;
  }
  return tensor;
}

PyObject* EagerTensors::Wrap(const TF_Tensor& tensor) const {
  StatusPointer status(TF_NewStatus());
  TFE_TensorHandle* handle = new_handle_(&tensor, status.get());
  if (TF_GetCode(status.get()) != TF_OK || handle == nullptr) {
    SetPythonError("making the result tensor", *status);
    return nullptr;
  }
  // The EagerTensor owns the handle from here. Where TensorFlow cannot make
  // one, it returns nullptr and never frees the object it may have begun
  // (nor the handle in it): the handle is this call's to delete.
  PyObject* wrapped = from_handle_(handle, /*is_packed=*/false);
  if (wrapped == nullptr) {
    delete_handle_(handle);
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError,
                      "tfdist: TensorFlow could not make the result EagerTensor (is its "
                      "eager context set up?)");
    }
  }
  return wrapped;
}

}  // namespace tfdist
