// The eager fast path: an allreduce of a small CPU tensor handed over by the
// Python package as raw buffers (eager_module.cc), without a TensorFlow op.
//
// TensorFlow's eager dispatch of a custom op costs several times the
// collective itself for a small tensor (several times MPI's own allreduce
// of 4 bytes). The request is the same one the
// TfdistAllreduce kernel would make, driven the same way (RunEagerRequest),
// with the same names, validation and errors; only the op dispatch is gone.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cc/core/runtime/request.h"
#include "cc/tf/c_api_status.h"
#include "cc/tf/eager_names.h"
#include "cc/tf/inline_completion.h"
#include "cc/tf/runtime_handle.h"

namespace tfdist {
namespace {

// Must match the op's type: unnamed calls share its name sequence.
constexpr char kAllreduceOpType[] = "TfdistAllreduce";

Status DescribeEagerAllreduce(const char* name, int dtype, const int64_t* shape, int ndims,
                              int reduce_op, double prescale, double postscale,
                              int algorithm, int process_set, int ranks, Request* r) {
  if (dtype < 0 || dtype >= static_cast<int>(DataType::kBool)) {
    return Status::InvalidArgument("tfdist.allreduce: unsupported dtype code " +
                                   std::to_string(dtype));
  }
  if (ndims < 0) return Status::InvalidArgument("negative rank");
  TensorDescription& d = r->description;
  d.type = CollectiveType::kAllreduce;
  d.dtype = static_cast<DataType>(dtype);
  d.shape.assign(shape, shape + ndims);
  TFDIST_RETURN_IF_ERROR(DescribeAlgorithm(algorithm, &d));
  TFDIST_RETURN_IF_ERROR(DescribeReduction(reduce_op, prescale, postscale, ranks, &d));
  r->name = (name != nullptr && name[0] != '\0') ? std::string(name)
                                                 : NextEagerName(kAllreduceOpType, process_set);
  return Status::OK();
}

// The call's Status, set once by whichever thread finishes the request: this
// one, polling inline (almost always, for a small tensor), or the runtime's.
// Not std::promise: its set_value goes through std::call_once, whose glibc
// implementation makes a futex syscall every time, a µs on a virtual machine
// on a path that costs ten.
class EagerResult {
 public:
  void Set(const Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = status;
    done_ = true;
    set_.notify_one();  // under the lock: the waiter cannot leave before it
  }

  Status Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    set_.wait(lock, [this] { return done_; });
    return status_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable set_;
  bool done_ = false;
  Status status_;
};

}  // namespace
}  // namespace tfdist

extern "C" {

// Allreduces `input` (dtype: a DataType code; shape[0..ndims)) into `output`
// (same size, may not overlap `input`) and returns when done: 0, or a
// StatusCode with the message in `error`. `name` empty: the next eager name.
// `reduce_op`, `algorithm` and `process_set` are the op attributes' codes.
int tfdist_eager_allreduce(const char* name, int dtype, const int64_t* shape, int ndims,
                           const void* input, void* output, int reduce_op, double prescale,
                           double postscale, int algorithm, int process_set, char* error,
                           int error_length) {
  // The runtime alone: its size is the set's, and copying the handle's
  // topology (vectors, host names) on every call is waste on this path.
  std::shared_ptr<tfdist::Runtime> runtime;
  tfdist::Status status =
      tfdist::ProcessSetRuntimeOnly(process_set, tfdist::kAllreduceOpType, &runtime);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  tfdist::Request request;
  status = tfdist::DescribeEagerAllreduce(name, dtype, shape, ndims, reduce_op, prescale,
                                          postscale, algorithm, process_set, runtime->size(),
                                          &request);
  if (!status.ok()) return tfdist::ReportStatus(status, error, error_length);
  request.input = input;
  request.output = output;
  // Shared: the runtime's thread may deliver the result after this thread
  // stopped polling (it then blocks in Wait()).
  auto result = std::make_shared<tfdist::EagerResult>();
  tfdist::RunEagerRequest(*runtime, std::move(request),
                          [result](const tfdist::Status& s) { result->Set(s); });
  return tfdist::ReportStatus(result->Wait(), error, error_length);
}

}  // extern "C"
