// TensorFlow kernels of tfdist's collectives. Each one only describes its
// tensor, hands it to the runtime and returns; the runtime's thread does the
// communication and calls `done` (the runtime contract in docs/design.md).
#include <atomic>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "cc/tf/data_types.h"
#include "cc/tf/eager_names.h"
#include "cc/tf/inline_completion.h"
#include "cc/tf/group_completion.h"
#include "cc/tf/runtime_handle.h"
#include "cc/tf/tf_status.h"

namespace tfdist {

namespace tf = ::tensorflow;

namespace {

Status ToCoreType(tf::DataType dtype, DataType* out) {
  if (CoreTypeOf(static_cast<TF_DataType>(dtype), out)) return Status::OK();
  return Status::InvalidArgument("tfdist does not support dtype " + tf::DataTypeString(dtype));
}

absl::Status ParseScale(tf::OpKernelConstruction* c, const char* attr, double* out) {
  std::string text;
  TF_RETURN_IF_ERROR(c->GetAttr(attr, &text));
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    return absl::InvalidArgumentError(absl::StrCat(attr, " must be a number, got '", text, "'"));
  }
  return absl::OkStatus();
}

void* Base(tf::Tensor* t) { return const_cast<char*>(t->tensor_data().data()); }
const void* Base(const tf::Tensor& t) { return t.tensor_data().data(); }

std::vector<int64_t> Dims(const tf::TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

// Allocates output `index` on the runtime's thread once its shape is known.
OutputAllocator AllocateOutput(tf::OpKernelContext* ctx, int index) {
  return [ctx, index](const std::vector<int64_t>& shape, void** data) {
    tf::TensorShape tf_shape;
    for (int64_t d : shape) tf_shape.AddDim(d);
    tf::Tensor* output = nullptr;
    absl::Status s = ctx->allocate_output(index, tf_shape, &output);
    if (!s.ok()) return Status::Internal("allocating the output: " + std::string(s.message()));
    *data = Base(output);
    return Status::OK();
  };
}

// What every collective kernel does: find the runtime, name the tensor,
// describe it (subclass), enqueue, and complete the op when the runtime says.
class CollectiveKernel : public tf::AsyncOpKernel {
 public:
  explicit CollectiveKernel(tf::OpKernelConstruction* c) : tf::AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(c, c->GetAttr("eager", &eager_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) final {
    RuntimeHandle handle;
    OP_REQUIRES_OK_ASYNC(
        ctx, ToTfStatus(ProcessSetRuntime(process_set_id_, type_string(), &handle)), done);
    Request request;
    request.name = TensorName();
    Status prepared = Describe(ctx, handle.topology, &request);
    OP_REQUIRES_OK_ASYNC(ctx, ToTfStatus(prepared), done);
    InlineCompletion::Finish finish = [this, ctx, done](const Status& s) {
      if (s.ok()) Succeeded();
      ctx->SetStatus(ToTfStatus(s));
      done();
    };
    if (!eager_) {
      request.done = finish;
      Status enqueued = handle.runtime->Enqueue(std::move(request));
      if (!enqueued.ok()) finish(enqueued);
      return;
    }
    RunEagerRequest(*handle.runtime, std::move(request), std::move(finish));
  }

 protected:
  // Fills in the request's description and buffers.
  virtual Status Describe(tf::OpKernelContext* ctx, const Topology& topology,
                          Request* request) = 0;
  // Runs when the collective succeeded, before the op completes.
  virtual void Succeeded() {}
  int process_set_id() const { return process_set_id_; }

 private:
  std::string TensorName() const {
    if (!tensor_name_.empty()) return tensor_name_;
    if (eager_) return NextEagerName(type_string(), process_set_id_);
    return name();
  }

  std::string tensor_name_;
  bool eager_ = false;
  int process_set_id_ = kGlobalProcessSet;
};

Status DescribeInput(const tf::Tensor& input, CollectiveType type, TensorDescription* d) {
  d->type = type;
  TFDIST_RETURN_IF_ERROR(ToCoreType(input.dtype(), &d->dtype));
  d->shape = Dims(input.shape());
  return Status::OK();
}

Status NeedsFirstDimension(const tf::Tensor& input, const char* op) {
  if (input.dims() == 0) {
    return Status::InvalidArgument(std::string("tfdist.") + op +
                                   " needs a tensor with at least one dimension, got a scalar");
  }
  return Status::OK();
}

// The attributes every reduction has (reduce_op, scale factors), shared by
// the allreduce and reducescatter kernels. Average is Sum with a postscale
// of 1/size.
struct ReductionAttrs {
  int reduce_op = 0;
  double prescale = 1.0;
  double postscale = 1.0;

  absl::Status Read(tf::OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(c->GetAttr("reduce_op", &reduce_op));
    TF_RETURN_IF_ERROR(ParseScale(c, "prescale_factor", &prescale));
    TF_RETURN_IF_ERROR(ParseScale(c, "postscale_factor", &postscale));
    TensorDescription probe;
    return ToTfStatus(DescribeReduction(reduce_op, prescale, postscale, 1, &probe));
  }

  Status Apply(const Topology& topology, TensorDescription* d) const {
    return DescribeReduction(reduce_op, prescale, postscale, topology.size, d);
  }
};

// The attributes of an allreduce (TfdistAllreduce, TfdistGroupedAllreduce)
// and how they describe input `index` of a kernel as a request.
struct AllreduceAttrs {
  ReductionAttrs reduction;
  int algorithm = 0;
  int compression = 0;

  absl::Status Read(tf::OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(reduction.Read(c));
    TF_RETURN_IF_ERROR(c->GetAttr("algorithm", &algorithm));
    TF_RETURN_IF_ERROR(c->GetAttr("compression", &compression));
    TensorDescription probe;
    TF_RETURN_IF_ERROR(ToTfStatus(DescribeAlgorithm(algorithm, &probe)));
    TF_RETURN_IF_ERROR(ToTfStatus(reduction.Apply(Topology(), &probe)));
    TF_RETURN_IF_ERROR(ToTfStatus(DescribeCompression(compression, &probe)));
    return absl::OkStatus();
  }

  Status Describe(tf::OpKernelContext* ctx, int index, const Topology& topology,
                  Request* r) const {
    const tf::Tensor& input = ctx->input(index);
    TensorDescription& d = r->description;
    TFDIST_RETURN_IF_ERROR(DescribeInput(input, CollectiveType::kAllreduce, &d));
    TFDIST_RETURN_IF_ERROR(reduction.Apply(topology, &d));
    TFDIST_RETURN_IF_ERROR(DescribeAlgorithm(algorithm, &d));
    TFDIST_RETURN_IF_ERROR(DescribeCompression(compression, &d));
    tf::Tensor* output = nullptr;
    absl::Status s = ctx->forward_input_or_allocate_output({index}, index, input.shape(), &output);
    if (!s.ok()) return Status::Internal("allocating the output: " + std::string(s.message()));
    r->input = Base(input);
    r->output = Base(output);
    return Status::OK();
  }
};

class AllreduceKernel : public CollectiveKernel {
 public:
  explicit AllreduceKernel(tf::OpKernelConstruction* c) : CollectiveKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology& topology, Request* r) override {
    return attrs_.Describe(ctx, 0, topology, r);
  }

 private:
  AllreduceAttrs attrs_;
};

// N collectives enqueued and completed as one unit (TfdistGrouped*): member
// i is named "<name>.<i>" and carries the group's size, which ranks must
// agree on (a rank whose group is rejected withdraws it whole, runtime.cc).
class GroupedKernel : public tf::AsyncOpKernel {
 public:
  explicit GroupedKernel(tf::OpKernelConstruction* c) : tf::AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(c, c->GetAttr("eager", &eager_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) final {
    const int n = ctx->num_inputs();
    if (n == 0) {
      done();
      return;
    }
    RuntimeHandle handle;
    OP_REQUIRES_OK_ASYNC(
        ctx, ToTfStatus(ProcessSetRuntime(process_set_id_, type_string(), &handle)), done);
    std::string base = tensor_name_;
    if (base.empty()) {
      base = eager_ ? NextEagerName(type_string(), process_set_id_) : name();
    }
    // The last request to finish completes the op with the first error seen.
    const GroupCompletion group(n, [ctx, done](const Status& s) {
      ctx->SetStatus(ToTfStatus(s));
      done();
    });
    std::vector<Request> requests(n);
    for (int i = 0; i < n; ++i) {
      requests[i].name = base + "." + std::to_string(i);
      OP_REQUIRES_OK_ASYNC(ctx, ToTfStatus(DescribeMember(ctx, i, handle.topology,
                                                          &requests[i])), done);
      requests[i].description.group_size = n;
      requests[i].done = group.MemberDone();
    }
    Status enqueued = handle.runtime->EnqueueGroup(std::move(requests));
    if (!enqueued.ok()) {
      ctx->SetStatus(ToTfStatus(enqueued));
      done();
    }
  }

 protected:
  // Describes input `index` as request `r` (its output is output `index`).
  virtual Status DescribeMember(tf::OpKernelContext* ctx, int index, const Topology& topology,
                                Request* r) = 0;

 private:
  std::string tensor_name_;
  bool eager_ = false;
  int process_set_id_ = kGlobalProcessSet;
};

class GroupedAllreduceKernel : public GroupedKernel {
 public:
  explicit GroupedAllreduceKernel(tf::OpKernelConstruction* c) : GroupedKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

 protected:
  Status DescribeMember(tf::OpKernelContext* ctx, int index, const Topology& topology,
                        Request* r) override {
    return attrs_.Describe(ctx, index, topology, r);
  }

 private:
  AllreduceAttrs attrs_;
};

// Input `index` as an allgather whose result is output `index`.
Status DescribeAllgather(tf::OpKernelContext* ctx, int index, Request* r) {
  const tf::Tensor& input = ctx->input(index);
  TFDIST_RETURN_IF_ERROR(NeedsFirstDimension(input, "allgather"));
  TFDIST_RETURN_IF_ERROR(DescribeInput(input, CollectiveType::kAllgather, &r->description));
  r->input = Base(input);
  r->allocate_output = AllocateOutput(ctx, index);
  return Status::OK();
}

class AllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology&, Request* r) override {
    return DescribeAllgather(ctx, 0, r);
  }
};

class GroupedAllgatherKernel : public GroupedKernel {
 public:
  using GroupedKernel::GroupedKernel;

 protected:
  Status DescribeMember(tf::OpKernelContext* ctx, int index, const Topology&,
                        Request* r) override {
    return DescribeAllgather(ctx, index, r);
  }
};

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(tf::OpKernelConstruction* c) : CollectiveKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology& topology, Request* r) override {
    if (root_ < 0 || root_ >= topology.size) {
      return Status::InvalidArgument("tfdist.broadcast: root_rank " + std::to_string(root_) +
                                     " is not a rank of this job or process set (size " +
                                     std::to_string(topology.size) + ")");
    }
    const tf::Tensor& input = ctx->input(0);
    TFDIST_RETURN_IF_ERROR(DescribeInput(input, CollectiveType::kBroadcast, &r->description));
    r->description.root = root_;
    tf::Tensor* output = nullptr;
    absl::Status s = ctx->forward_input_or_allocate_output({0}, 0, input.shape(), &output);
    if (!s.ok()) return Status::Internal("allocating the output: " + std::string(s.message()));
    r->input = Base(input);
    r->output = Base(output);
    return Status::OK();
  }

 private:
  int root_ = 0;
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology& topology, Request* r) override {
    const tf::Tensor& input = ctx->input(0);
    const tf::Tensor& splits = ctx->input(1);
    TFDIST_RETURN_IF_ERROR(NeedsFirstDimension(input, "alltoall"));
    TensorDescription& d = r->description;
    TFDIST_RETURN_IF_ERROR(DescribeInput(input, CollectiveType::kAlltoall, &d));
    const int64_t rows = d.shape[0];
    if (splits.NumElements() == 0) {
      if (rows % topology.size != 0) {
        return Status::InvalidArgument(
            "tfdist.alltoall: without splits the first dimension (" + std::to_string(rows) +
            ") must divide evenly by the number of ranks (" + std::to_string(topology.size) + ")");
      }
      d.splits.assign(topology.size, rows / topology.size);
    } else {
      auto values = splits.flat<int64_t>();
      if (values.size() != topology.size) {
        return Status::InvalidArgument("tfdist.alltoall: splits has " +
                                       std::to_string(values.size()) + " entries, expected one per rank (" +
                                       std::to_string(topology.size) + ")");
      }
      int64_t sum = 0;
      for (int i = 0; i < topology.size; ++i) {
        if (values(i) < 0) return Status::InvalidArgument("tfdist.alltoall: negative split");
        d.splits.push_back(values(i));
        sum += values(i);
      }
      if (sum != rows) {
        return Status::InvalidArgument("tfdist.alltoall: splits add up to " + std::to_string(sum) +
                                       " but the first dimension is " + std::to_string(rows));
      }
    }
    r->input = Base(input);
    r->allocate_output = AllocateOutput(ctx, 0);
    r->report_splits = [ctx](const std::vector<int64_t>& received) {
      tf::Tensor* out = nullptr;
      absl::Status s = ctx->allocate_output(1, tf::TensorShape({static_cast<int64_t>(received.size())}), &out);
      if (!s.ok()) return Status::Internal("allocating received_splits: " + std::string(s.message()));
      auto flat = out->flat<int64_t>();
      for (size_t i = 0; i < received.size(); ++i) flat(i) = received[i];
      return Status::OK();
    };
    return Status::OK();
  }
};

// Input `index` as a reducescatter whose result is output `index`.
Status DescribeReducescatter(tf::OpKernelContext* ctx, int index, const ReductionAttrs& attrs,
                             const Topology& topology, Request* r) {
  const tf::Tensor& input = ctx->input(index);
  TFDIST_RETURN_IF_ERROR(NeedsFirstDimension(input, "reducescatter"));
  TFDIST_RETURN_IF_ERROR(DescribeInput(input, CollectiveType::kReducescatter, &r->description));
  TFDIST_RETURN_IF_ERROR(attrs.Apply(topology, &r->description));
  r->input = Base(input);
  r->allocate_output = AllocateOutput(ctx, index);
  return Status::OK();
}

class ReducescatterKernel : public CollectiveKernel {
 public:
  explicit ReducescatterKernel(tf::OpKernelConstruction* c) : CollectiveKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology& topology, Request* r) override {
    return DescribeReducescatter(ctx, 0, attrs_, topology, r);
  }

 private:
  ReductionAttrs attrs_;
};

class GroupedReducescatterKernel : public GroupedKernel {
 public:
  explicit GroupedReducescatterKernel(tf::OpKernelConstruction* c) : GroupedKernel(c) {
    OP_REQUIRES_OK(c, attrs_.Read(c));
  }

 protected:
  Status DescribeMember(tf::OpKernelContext* ctx, int index, const Topology& topology,
                        Request* r) override {
    return DescribeReducescatter(ctx, index, attrs_, topology, r);
  }

 private:
  ReductionAttrs attrs_;
};

class BarrierKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology& topology, Request* r) override {
    r->description.type = CollectiveType::kBarrier;
    r->description.dtype = DataType::kInt32;
    tf::Tensor* output = nullptr;
    absl::Status s = ctx->allocate_output(0, tf::TensorShape({}), &output);
    if (!s.ok()) return Status::Internal("allocating the output: " + std::string(s.message()));
    output->scalar<int32_t>()() = topology.size;
    return Status::OK();
  }
};

// Output: the rank that joined last. The runtime writes it (executor.h).
class JoinKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;

 protected:
  Status Describe(tf::OpKernelContext* ctx, const Topology&, Request* r) override {
    r->description.type = CollectiveType::kJoin;
    r->description.dtype = DataType::kInt32;
    tf::Tensor* output = nullptr;
    absl::Status s = ctx->allocate_output(0, tf::TensorShape({}), &output);
    if (!s.ok()) return Status::Internal("allocating the output: " + std::string(s.message()));
    r->output = Base(output);
    return Status::OK();
  }
  void Succeeded() override { RestartEagerNames(process_set_id()); }
};

// The global set's runtime, for the kernels that are not collectives.
absl::Status InitializedRuntime(RuntimeHandle* handle) {
  *handle = CurrentRuntime();
  if (handle->runtime == nullptr) {
    return absl::FailedPreconditionError("tfdist is not initialized: call tfdist.init() first");
  }
  return absl::OkStatus();
}

class TopologyKernel : public tf::OpKernel {
 public:
  explicit TopologyKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("which", &which_));
  }
  void Compute(tf::OpKernelContext* ctx) override {
    RuntimeHandle handle;
    OP_REQUIRES_OK(ctx, InitializedRuntime(&handle));
    const Topology& t = handle.topology;
    const int values[] = {t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size};
    OP_REQUIRES(ctx, which_ >= 0 && which_ < 6, absl::InvalidArgumentError("bad which"));
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = values[which_];
  }

 private:
  int which_ = 0;
};

class GradientGroupsKernel : public tf::OpKernel {
 public:
  explicit GradientGroupsKernel(tf::OpKernelConstruction* c) : tf::OpKernel(c) {
    std::vector<int> candidates;
    OP_REQUIRES_OK(c, c->GetAttr("candidates", &candidates));
    OP_REQUIRES(c, !candidates.empty(),
                absl::InvalidArgumentError("TfdistGradientGroups needs candidates"));
    candidates_.assign(candidates.begin(), candidates.end());
  }
  void Compute(tf::OpKernelContext* ctx) override {
    RuntimeHandle handle;
    OP_REQUIRES_OK(ctx, InitializedRuntime(&handle));
    const int64_t iteration = ctx->input(0).scalar<int64_t>()();
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &output));
    output->scalar<int32_t>()() = handle.runtime->AskGradientGroups(candidates_, iteration);
  }

 private:
  std::vector<int32_t> candidates_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfdistAllreduce").Device(tf::DEVICE_CPU), AllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistGroupedAllreduce").Device(tf::DEVICE_CPU),
                        GroupedAllreduceKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistAllgather").Device(tf::DEVICE_CPU), AllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistBroadcast").Device(tf::DEVICE_CPU), BroadcastKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistAlltoall").Device(tf::DEVICE_CPU), AlltoallKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistReducescatter").Device(tf::DEVICE_CPU), ReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistGroupedAllgather").Device(tf::DEVICE_CPU),
                        GroupedAllgatherKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistGroupedReducescatter").Device(tf::DEVICE_CPU),
                        GroupedReducescatterKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistBarrier").Device(tf::DEVICE_CPU), BarrierKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistJoin").Device(tf::DEVICE_CPU), JoinKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistTopology").Device(tf::DEVICE_CPU), TopologyKernel);
REGISTER_KERNEL_BUILDER(Name("TfdistGradientGroups").Device(tf::DEVICE_CPU), GradientGroupsKernel);

}  // namespace tfdist
