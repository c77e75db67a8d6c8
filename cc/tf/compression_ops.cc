// TensorFlow ops of the top-k and PowerSGD compressors: the steps that touch
// a rank's compression state (residuals, warm-start factors, step counts)
// or that are cheaper in C++ than as a chain of TF ops. They run
// synchronously on the calling thread; the collectives between them are the
// ordinary tfdist ops, called from tfdist/sparse_compression.py.
//
// State keys (tfdist.runtime.rank_state() shows them):
//   topk.residual/<tensor>     float32, the tensor's shape
//   topk.velocity/<tensor>     float32, the tensor's shape (momentum > 0)
//   powersgd.residual/<tensor> float32, n x m
//   powersgd.q/<tensor>        float32, m x rank (the last allreduced Q)
//   step/<key>                 int64 scalar (TfdistCompressionStep)
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"

#include "cc/core/compression/orthogonalize.h"
#include "cc/core/compression/powersgd.h"
#include "cc/core/compression/scatter_add.h"
#include "cc/core/compression/topk.h"
#include "cc/tf/group_completion.h"
#include "cc/tf/runtime_handle.h"
#include "cc/tf/tf_status.h"

namespace tfdist {

namespace tf = ::tensorflow;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

absl::Status ParseRatio(const std::string& text, double* ratio) {
  char* end = nullptr;
  *ratio = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(*ratio > 0.0 && *ratio <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k ratio must be a number in (0, 1], got '", text, "'"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> Dims(const tf::TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

// The state store of the running runtime, or the error of a kernel that
// needs one before tfdist.init().
absl::Status CurrentStore(const std::string& op, std::shared_ptr<StateStore>* store) {
  RuntimeHandle handle = CurrentRuntime();
  if (!handle.runtime || !handle.compression_state) {
    return ToTfStatus(NotInitializedError(op));
  }
  *store = handle.compression_state;
  return absl::OkStatus();
}

const float* Floats(const tf::Tensor& t) { return t.flat<float>().data(); }
float* Floats(tf::Tensor* t) { return t->flat<float>().data(); }

}  // namespace

// Selects the k = ceil(ratio * n) entries of gradient + residual (the
// residual of `state_name`, when error_feedback) with the largest magnitude;
// the rest becomes the new residual. Indices are into the flattened tensor,
// in increasing order. With momentum > 0 (which needs error_feedback) the
// gradient first goes through DGC's momentum correction (topk.h), with its
// velocity kept under topk.velocity/<state_name>.
REGISTER_OP("TfdistTopkCompress")
    .Input("gradient: float")
    .Output("indices: int32")
    .Output("values: float")
    .Attr("ratio: string")
    .Attr("state_name: string")
    .Attr("error_feedback: bool = true")
    .Attr("momentum: float = 0.0")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      std::string text;
      TF_RETURN_IF_ERROR(c->GetAttr("ratio", &text));
      double ratio = 0.0;
      TF_RETURN_IF_ERROR(ParseRatio(text, &ratio));
      DimensionHandle k = c->UnknownDim();
      if (c->FullyDefined(c->input(0))) {
        k = c->MakeDim(static_cast<int64_t>(
            TopkCount(ratio, static_cast<size_t>(c->Value(c->NumElements(c->input(0)))))));
      }
      c->set_output(0, c->Vector(k));
      c->set_output(1, c->Vector(k));
      return absl::OkStatus();
    });

class TopkCompressKernel : public tf::OpKernel {
 public:
  explicit TopkCompressKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    std::string text;
    OP_REQUIRES_OK(c, c->GetAttr("ratio", &text));
    OP_REQUIRES_OK(c, ParseRatio(text, &ratio_));
    std::string name;
    OP_REQUIRES_OK(c, c->GetAttr("state_name", &name));
    key_ = "topk.residual/" + name;
    velocity_key_ = "topk.velocity/" + name;
    OP_REQUIRES_OK(c, c->GetAttr("error_feedback", &error_feedback_));
    OP_REQUIRES_OK(c, c->GetAttr("momentum", &momentum_));
    OP_REQUIRES(c, momentum_ >= 0.0f && momentum_ < 1.0f,
                absl::InvalidArgumentError(
                    absl::StrCat("top-k momentum must be in [0, 1), got ", momentum_)));
    OP_REQUIRES(c, momentum_ == 0.0f || error_feedback_,
                absl::InvalidArgumentError("top-k momentum correction needs error_feedback"));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& gradient = ctx->input(0);
    const size_t n = static_cast<size_t>(gradient.NumElements());
    const size_t k = TopkCount(ratio_, n);
    tf::Tensor* indices = nullptr;
    tf::Tensor* values = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({static_cast<int64_t>(k)}),
                                             &indices));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, tf::TensorShape({static_cast<int64_t>(k)}),
                                             &values));
    int32_t* index_data = indices->flat<int32_t>().data();
    if (!error_feedback_) {
      OP_REQUIRES_OK(ctx, ToTfStatus(TopkSelect(Floats(gradient), n, k, index_data,
                                                Floats(values), nullptr)));
      return;
    }
    std::shared_ptr<StateStore> store;
    OP_REQUIRES_OK(ctx, CurrentStore(type_string(), &store));
    std::shared_ptr<StateArray> residual =
        store->GetOrCreate(key_, DataType::kFloat32, Dims(gradient.shape()));
    std::lock_guard<std::mutex> lock(residual->mutex);
    float* accumulated = residual->floats();
    const float* g = Floats(gradient);
    if (momentum_ > 0.0f) {
      std::shared_ptr<StateArray> velocity =
          store->GetOrCreate(velocity_key_, DataType::kFloat32, Dims(gradient.shape()));
      std::lock_guard<std::mutex> velocity_lock(velocity->mutex);
      OP_REQUIRES_OK(ctx, ToTfStatus(TopkSelectWithMomentum(g, n, k, momentum_,
                                                            velocity->floats(), accumulated,
                                                            index_data, Floats(values))));
      return;
    }
    for (size_t i = 0; i < n; ++i) accumulated[i] += g[i];
    OP_REQUIRES_OK(ctx, ToTfStatus(TopkSelect(accumulated, n, k, index_data, Floats(values),
                                              accumulated)));
  }

 private:
  double ratio_ = 1.0;
  std::string key_;
  std::string velocity_key_;
  bool error_feedback_ = true;
  float momentum_ = 0.0f;
};

// Adds every (index, value) pair into a zero tensor of `size` elements, in
// input order.
REGISTER_OP("TfdistScatterAdd")
    .Input("indices: int32")
    .Input("values: float")
    .Output("dense: float")
    .Attr("size: int")
    .SetShapeFn([](InferenceContext* c) {
      int64_t size = 0;
      TF_RETURN_IF_ERROR(c->GetAttr("size", &size));
      c->set_output(0, c->Vector(size));
      return absl::OkStatus();
    });

class ScatterAddKernel : public tf::OpKernel {
 public:
  explicit ScatterAddKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("size", &size_));
    OP_REQUIRES(c, size_ >= 0, absl::InvalidArgumentError("scatter-add: size must be >= 0"));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& indices = ctx->input(0);
    const tf::Tensor& values = ctx->input(1);
    OP_REQUIRES(ctx, indices.NumElements() == values.NumElements(),
                absl::InvalidArgumentError(absl::StrCat(
                    "scatter-add: ", indices.NumElements(), " indices but ",
                    values.NumElements(), " values")));
    tf::Tensor* dense = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({size_}), &dense));
    float* out = Floats(dense);
    std::memset(out, 0, sizeof(float) * static_cast<size_t>(size_));
    OP_REQUIRES_OK(ctx, ToTfStatus(ScatterAdd(indices.flat<int32_t>().data(), Floats(values),
                                              static_cast<size_t>(values.NumElements()), out,
                                              static_cast<size_t>(size_))));
  }

 private:
  int64_t size_ = 0;
};

// gradient + the residual kept under `state_name` by TfdistTopkCompress,
// which is then dropped: for a step that sends the tensor dense. With
// momentum > 0 the gradient first goes through the momentum correction, and
// the velocity is kept whole: a dense step delays nothing, so there is no
// stale momentum to mask, and dense steps are then ordinary momentum SGD.
REGISTER_OP("TfdistResidualFlush")
    .Input("gradient: float")
    .Output("accumulated: float")
    .Attr("state_name: string")
    .Attr("momentum: float = 0.0")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

class ResidualFlushKernel : public tf::OpKernel {
 public:
  explicit ResidualFlushKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    std::string name;
    OP_REQUIRES_OK(c, c->GetAttr("state_name", &name));
    key_ = "topk.residual/" + name;
    velocity_key_ = "topk.velocity/" + name;
    OP_REQUIRES_OK(c, c->GetAttr("momentum", &momentum_));
    OP_REQUIRES(c, momentum_ >= 0.0f && momentum_ < 1.0f,
                absl::InvalidArgumentError(
                    absl::StrCat("top-k momentum must be in [0, 1), got ", momentum_)));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& gradient = ctx->input(0);
    std::shared_ptr<StateStore> store;
    OP_REQUIRES_OK(ctx, CurrentStore(type_string(), &store));
    if (momentum_ > 0.0f) {
      FlushWithMomentum(ctx, gradient, store.get());
      return;
    }
    std::shared_ptr<StateArray> residual = store->Find(key_);
    if (residual == nullptr) {
      ctx->set_output(0, gradient);
      return;
    }
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, gradient.shape(), &output));
    {
      std::lock_guard<std::mutex> lock(residual->mutex);
      const size_t n = static_cast<size_t>(gradient.NumElements());
      const bool matches = residual->shape == Dims(gradient.shape());
      const float* r = residual->floats();
      const float* g = Floats(gradient);
      float* out = Floats(output);
      for (size_t i = 0; i < n; ++i) out[i] = matches ? g[i] + r[i] : g[i];
    }
    store->Erase(key_);
  }

 private:
  void FlushWithMomentum(tf::OpKernelContext* ctx, const tf::Tensor& gradient,
                         StateStore* store) {
    const size_t n = static_cast<size_t>(gradient.NumElements());
    const std::vector<int64_t> dims = Dims(gradient.shape());
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, gradient.shape(), &output));
    float* out = Floats(output);
    std::memset(out, 0, sizeof(float) * n);
    if (std::shared_ptr<StateArray> residual = store->Find(key_)) {
      std::lock_guard<std::mutex> lock(residual->mutex);
      if (residual->shape == dims) std::memcpy(out, residual->floats(), sizeof(float) * n);
    }
    std::shared_ptr<StateArray> velocity =
        store->GetOrCreate(velocity_key_, DataType::kFloat32, dims);
    {
      std::lock_guard<std::mutex> lock(velocity->mutex);
      MomentumAccumulate(Floats(gradient), n, momentum_, velocity->floats(), out);
    }
    store->Erase(key_);
  }

  std::string key_;
  std::string velocity_key_;
  float momentum_ = 0.0f;
};

// The start of a PowerSGD step for the n x m `matrix` called `state_name`:
// accumulated = matrix + residual (when error_feedback) and the Q to
// multiply by (last step's, or the name's initial Q).
REGISTER_OP("TfdistPowersgdPrepare")
    .Input("matrix: float")
    .Output("accumulated: float")
    .Output("q: float")
    .Attr("state_name: string")
    .Attr("rank: int")
    .Attr("error_feedback: bool = true")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle matrix;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &matrix));
      int64_t rank = 0;
      TF_RETURN_IF_ERROR(c->GetAttr("rank", &rank));
      c->set_output(0, matrix);
      c->set_output(1, c->Matrix(c->Dim(matrix, 1), rank));
      return absl::OkStatus();
    });

class PowersgdPrepareKernel : public tf::OpKernel {
 public:
  explicit PowersgdPrepareKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("state_name", &name_));
    OP_REQUIRES_OK(c, c->GetAttr("rank", &rank_));
    OP_REQUIRES(c, rank_ >= 1,
                absl::InvalidArgumentError(absl::StrCat("PowerSGD rank must be >= 1, got ",
                                                        rank_)));
    OP_REQUIRES_OK(c, c->GetAttr("error_feedback", &error_feedback_));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& matrix = ctx->input(0);
    OP_REQUIRES(ctx, matrix.dims() == 2,
                absl::InvalidArgumentError("PowerSGD works on a matrix (n x m)"));
    const int64_t m = matrix.dim_size(1);
    std::shared_ptr<StateStore> store;
    OP_REQUIRES_OK(ctx, CurrentStore(type_string(), &store));

    tf::Tensor* q = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, tf::TensorShape({m, rank_}), &q));
    bool created = false;
    std::shared_ptr<StateArray> warm =
        store->GetOrCreate("powersgd.q/" + name_, DataType::kFloat32, {m, rank_}, &created);
    {
      std::lock_guard<std::mutex> lock(warm->mutex);
      if (created) {
        PowerSgdInitialQ(name_, m, rank_, warm->floats());
      } else {
        PowerSgdRefillQ(name_, m, rank_, warm->floats());
      }
      std::memcpy(Floats(q), warm->floats(), sizeof(float) * m * rank_);
    }

    if (!error_feedback_) {
      ctx->set_output(0, matrix);
      return;
    }
    tf::Tensor* accumulated = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, matrix.shape(), &accumulated));
    std::shared_ptr<StateArray> residual = store->GetOrCreate(
        "powersgd.residual/" + name_, DataType::kFloat32, Dims(matrix.shape()));
    std::lock_guard<std::mutex> lock(residual->mutex);
    const size_t n = static_cast<size_t>(matrix.NumElements());
    const float* g = Floats(matrix);
    const float* r = residual->floats();
    float* out = Floats(accumulated);
    for (size_t i = 0; i < n; ++i) out[i] = g[i] + r[i];
  }

 private:
  std::string name_;
  int64_t rank_ = 1;
  bool error_feedback_ = true;
};

// The columns of an n x r matrix made orthonormal (modified Gram-Schmidt;
// zero and dependent columns become zero).
REGISTER_OP("TfdistOrthogonalize")
    .Input("matrix: float")
    .Output("orthonormal: float")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle matrix;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &matrix));
      c->set_output(0, matrix);
      return absl::OkStatus();
    });

class OrthogonalizeKernel : public tf::OpKernel {
 public:
  explicit OrthogonalizeKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {}

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& matrix = ctx->input(0);
    OP_REQUIRES(ctx, matrix.dims() == 2,
                absl::InvalidArgumentError("orthogonalize needs a matrix"));
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, matrix.shape(), &output));
    std::memcpy(Floats(output), Floats(matrix), sizeof(float) * matrix.NumElements());
    OrthonormalizeColumns(Floats(output), matrix.dim_size(0), matrix.dim_size(1));
  }
};

// The end of a PowerSGD step: output = p_hat q_reduced^T; keeps q_reduced
// as the next warm start and, with error_feedback, accumulated -
// p_hat q_local^T as the residual.
REGISTER_OP("TfdistPowersgdFinish")
    .Input("accumulated: float")
    .Input("p_hat: float")
    .Input("q_local: float")
    .Input("q_reduced: float")
    .Output("output: float")
    .Attr("state_name: string")
    .Attr("error_feedback: bool = true")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

class PowersgdFinishKernel : public tf::OpKernel {
 public:
  explicit PowersgdFinishKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("state_name", &name_));
    OP_REQUIRES_OK(c, c->GetAttr("error_feedback", &error_feedback_));
  }

  void Compute(tf::OpKernelContext* ctx) override {
    const tf::Tensor& accumulated = ctx->input(0);
    const tf::Tensor& p_hat = ctx->input(1);
    const tf::Tensor& q_local = ctx->input(2);
    const tf::Tensor& q_reduced = ctx->input(3);
    OP_REQUIRES(ctx, accumulated.dims() == 2 && p_hat.dims() == 2 &&
                         q_local.shape() == q_reduced.shape() && q_local.dims() == 2,
                absl::InvalidArgumentError("PowerSGD finish: inputs must be matrices"));
    const int64_t n = accumulated.dim_size(0), m = accumulated.dim_size(1);
    const int64_t rank = p_hat.dim_size(1);
    OP_REQUIRES(ctx, p_hat.dim_size(0) == n && q_local.dim_size(0) == m &&
                         q_local.dim_size(1) == rank,
                absl::InvalidArgumentError(absl::StrCat(
                    "PowerSGD finish: shapes do not fit: M ", accumulated.shape().DebugString(),
                    ", P ", p_hat.shape().DebugString(), ", Q ",
                    q_local.shape().DebugString())));
    std::shared_ptr<StateStore> store;
    OP_REQUIRES_OK(ctx, CurrentStore(type_string(), &store));
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, accumulated.shape(), &output));

    std::shared_ptr<StateArray> residual;
    std::unique_lock<std::mutex> residual_lock;
    if (error_feedback_) {
      residual = store->GetOrCreate("powersgd.residual/" + name_, DataType::kFloat32, {n, m});
      residual_lock = std::unique_lock<std::mutex>(residual->mutex);
    }
    PowerSgdFinish(Floats(accumulated), Floats(p_hat), Floats(q_local), Floats(q_reduced), n,
                   m, rank, Floats(output), residual ? residual->floats() : nullptr);
    std::shared_ptr<StateArray> warm =
        store->GetOrCreate("powersgd.q/" + name_, DataType::kFloat32, {m, rank});
    std::lock_guard<std::mutex> lock(warm->mutex);
    std::memcpy(warm->floats(), Floats(q_reduced), sizeof(float) * m * rank);
  }

 private:
  std::string name_;
  bool error_feedback_ = true;
};

// How many times this op ran for `state_name` before (0 the first time);
// PowerSGD's start_step counts with it. Kept with the other state so that a
// restored job resumes the count.
REGISTER_OP("TfdistCompressionStep")
    .Output("step: int64")
    .Attr("state_name: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    });

class CompressionStepKernel : public tf::OpKernel {
 public:
  explicit CompressionStepKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    std::string name;
    OP_REQUIRES_OK(c, c->GetAttr("state_name", &name));
    key_ = "step/" + name;
  }

  void Compute(tf::OpKernelContext* ctx) override {
    std::shared_ptr<StateStore> store;
    OP_REQUIRES_OK(ctx, CurrentStore(type_string(), &store));
    std::shared_ptr<StateArray> counter = store->GetOrCreate(key_, DataType::kInt64, {});
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &output));
    std::lock_guard<std::mutex> lock(counter->mutex);
    output->scalar<int64_t>()() = counter->int64s()[0]++;
  }

 private:
  std::string key_;
};

// Every rank's top-k or PowerSGD call starts with this group of one-element
// allreduces, one per tensor of the call and named as a dense call would
// name it ("<name>", or "<group>.<i>" for grouped calls), whose descriptions
// carry the compressor's `settings` (request.h). The call's other ops run
// after it, so ranks whose settings differ all get the negotiation's
// FailedPrecondition naming the setting and both values before anything
// else of the call is submitted (which could otherwise differ in shape,
// count or name between the ranks); a rank that sends the same tensors
// uncompressed or as fp16/bf16 meets every one of these names and gets the
// same error, where other names would leave both sides waiting. It has no
// inputs, so in a tf.function it runs at the start of the step, hidden under
// the forward and backward passes.
REGISTER_OP("TfdistCompressorAgreement")
    .Output("ranks: int32")
    .Attr("settings: string")
    .Attr("tensor_names: list(string)")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      std::vector<std::string> names;
      TF_RETURN_IF_ERROR(c->GetAttr("tensor_names", &names));
      c->set_output(0, c->Vector(static_cast<int64_t>(names.size())));
      return absl::OkStatus();
    });

class CompressorAgreementKernel : public tf::AsyncOpKernel {
 public:
  explicit CompressorAgreementKernel(tf::OpKernelConstruction* c) : tf::AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("settings", &settings_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &tensor_names_));
    const bool named = !tensor_names_.empty() &&
                       std::none_of(tensor_names_.begin(), tensor_names_.end(),
                                    [](const std::string& n) { return n.empty(); });
    OP_REQUIRES(c, named && !settings_.empty(),
                absl::InvalidArgumentError("compressor agreement needs names and settings"));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    RuntimeHandle handle = CurrentRuntime();
    OP_REQUIRES_ASYNC(ctx, handle.runtime != nullptr,
                      ToTfStatus(NotInitializedError(type_string())), done);
    const int64_t n = static_cast<int64_t>(tensor_names_.size());
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, tf::TensorShape({n}), &output), done);
    // The last request to finish completes the op with the first error seen.
    const GroupCompletion group(n, [ctx, done](const Status& s) {
      ctx->SetStatus(ToTfStatus(s));
      done();
    });
    std::vector<Request> requests(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int32_t* element = output->flat<int32_t>().data() + i;
      *element = 1;
      Request& request = requests[static_cast<size_t>(i)];
      request.name = tensor_names_[static_cast<size_t>(i)];
      request.description.type = CollectiveType::kAllreduce;
      request.description.dtype = DataType::kInt32;
      request.description.shape = {1};
      request.description.op = ReduceOp::kSum;
      request.description.compressor = settings_;
      // In place: the allreduce reads and writes the one element.
      request.input = element;
      request.output = element;
      request.done = group.MemberDone();
    }
    Status enqueued = handle.runtime->EnqueueGroup(std::move(requests));
    if (!enqueued.ok()) {
      ctx->SetStatus(ToTfStatus(enqueued));
      done();
    }
  }

 private:
  std::string settings_;
  std::vector<std::string> tensor_names_;
};

// Records, for tfdist.stats(), that a compressed call sent `compressed`
// bytes where the same call without compression would have sent `dense`
// (both by the algorithms' formulas, tfdist/sparse_compression.py): the
// collectives the compressor runs count only what they moved, so without
// this bytes_uncompressed would count the compressed collectives.
REGISTER_OP("TfdistCountUncompressed")
    .Attr("dense: int")
    .Attr("compressed: int")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::NoOutputs);

class CountUncompressedKernel : public tf::OpKernel {
 public:
  explicit CountUncompressedKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    int64_t dense = 0, compressed = 0;
    OP_REQUIRES_OK(c, c->GetAttr("dense", &dense));
    OP_REQUIRES_OK(c, c->GetAttr("compressed", &compressed));
    // Unsigned wrap-around: a call that sent more than dense (a gather at
    // many ranks) subtracts, and bytes_sent + saved stays right.
    saved_ = static_cast<uint64_t>(dense) - static_cast<uint64_t>(compressed);
  }

  void Compute(tf::OpKernelContext* ctx) override {
    RuntimeHandle handle = CurrentRuntime();
    OP_REQUIRES(ctx, handle.runtime != nullptr, ToTfStatus(NotInitializedError(type_string())));
    handle.runtime->mutable_stats().bytes_saved_by_compression.fetch_add(saved_);
  }

 private:
  uint64_t saved_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("TfdistCompressorAgreement").Device(tf::DEVICE_CPU),
                        CompressorAgreementKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistCountUncompressed").Device(tf::DEVICE_CPU),
                        CountUncompressedKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistTopkCompress").Device(tf::DEVICE_CPU), TopkCompressKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistScatterAdd").Device(tf::DEVICE_CPU), ScatterAddKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistResidualFlush").Device(tf::DEVICE_CPU),
                        ResidualFlushKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistPowersgdPrepare").Device(tf::DEVICE_CPU),
                        PowersgdPrepareKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistOrthogonalize").Device(tf::DEVICE_CPU),
                        OrthogonalizeKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistPowersgdFinish").Device(tf::DEVICE_CPU),
                        PowersgdFinishKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistCompressionStep").Device(tf::DEVICE_CPU),
                        CompressionStepKernel);

}  // namespace tfdist
