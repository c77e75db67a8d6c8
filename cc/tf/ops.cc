// Registration of tfdist's TensorFlow ops: names, attributes, shapes.
// The kernels are in kernels.cc.
//
// Naming: ranks match collectives by name. An op with a tensor_name uses it;
// otherwise a graph op uses its node name, and an eager op (`eager`, set by
// the Python wrappers when executing eagerly) takes the next number of a
// per-process sequence, so that the n-th unnamed eager collective has the
// same name on every rank. Names are kept out of the attributes for eager
// ops so that TensorFlow's eager kernel cache hits. An eager op also waits
// for its result on the calling thread for a moment (inline_completion.h).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfdist {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// The first dimension depends on the other ranks; the rest is the input's.
// The input needs at least one dimension.
absl::Status UnknownFirstDimension(InferenceContext* c) {
  ShapeHandle input;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &input));
  ShapeHandle output;
  TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
  c->set_output(0, output);
  return absl::OkStatus();
}

// UnknownFirstDimension for every input of a grouped op.
absl::Status UnknownFirstDimensions(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    ShapeHandle input;
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(i), 1, &input));
    ShapeHandle output;
    TF_RETURN_IF_ERROR(c->ReplaceDim(input, 0, c->UnknownDim(), &output));
    c->set_output(i, output);
  }
  return absl::OkStatus();
}

absl::Status ScalarShape(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

// process_set_id: the process set the collective runs on (0: the global set;
// runtime_handle.h); root_rank and splits count ranks within that set.
//
// reduce_op: 0 sum, 1 min, 2 max, 3 product, 4 average, 5 adasum. compression: 0 none,
// 1 fp16, 2 bf16 (request.h WireCompression). Scale factors travel
// as decimal strings so that they keep double precision (TF has no double
// attribute).
REGISTER_OP("TfdistAllreduce")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {uint8, int8, int32, int64, half, bfloat16, float, double}")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: string = '1'")
    .Attr("postscale_factor: string = '1'")
    .Attr("algorithm: int = 0")
    .Attr("compression: int = 0")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

// N allreduces as one unit: enqueued together (so they are negotiated in the
// same round and fused where possible) and completed together. Tensor i is
// named "<name>.<i>". Every tensor may have its own dtype and shape.
REGISTER_OP("TfdistGroupedAllreduce")
    .Input("tensors: T")
    .Output("outputs: T")
    .Attr("T: list({uint8, int8, int32, int64, half, bfloat16, float, double})")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: string = '1'")
    .Attr("postscale_factor: string = '1'")
    .Attr("algorithm: int = 0")
    .Attr("compression: int = 0")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

REGISTER_OP("TfdistAllgather")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {bool, uint8, int8, int32, int64, half, bfloat16, float, double}")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDimension);

REGISTER_OP("TfdistBroadcast")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {bool, uint8, int8, int32, int64, half, bfloat16, float, double}")
    .Attr("root_rank: int")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("TfdistAlltoall")
    .Input("tensor: T")
    .Input("splits: int64")
    .Output("output: T")
    .Output("received_splits: int64")
    .Attr("T: {bool, uint8, int8, int32, int64, half, bfloat16, float, double}")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(UnknownFirstDimension(c));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

REGISTER_OP("TfdistReducescatter")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {uint8, int8, int32, int64, half, bfloat16, float, double}")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: string = '1'")
    .Attr("postscale_factor: string = '1'")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDimension);

// N allgathers, or N reducescatters, as one unit, as TfdistGroupedAllreduce
// (fused into one collective, fusion.h).
REGISTER_OP("TfdistGroupedAllgather")
    .Input("tensors: T")
    .Output("outputs: T")
    .Attr("T: list({bool, uint8, int8, int32, int64, half, bfloat16, float, double})")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDimensions);

REGISTER_OP("TfdistGroupedReducescatter")
    .Input("tensors: T")
    .Output("outputs: T")
    .Attr("T: list({uint8, int8, int32, int64, half, bfloat16, float, double})")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: string = '1'")
    .Attr("postscale_factor: string = '1'")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(UnknownFirstDimensions);

REGISTER_OP("TfdistBarrier")
    .Output("size: int32")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

// Completes once every rank has called it; until then this rank stands in
// for the collectives the others still run (join_state.h).
REGISTER_OP("TfdistJoin")
    .Output("last_rank: int32")
    .Attr("tensor_name: string = ''")
    .Attr("eager: bool = false")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

// Which of a traced training step's gradient groupings (num_groups values,
// the traced one first) the step at `iteration` runs: an index into
// `candidates`, chosen by autotuning (gradient_groups_schedule.h), else 0.
REGISTER_OP("TfdistGradientGroups")
    .Input("iteration: int64")
    .Output("index: int32")
    .Attr("candidates: list(int)")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

// Graph-time topology: evaluated when the graph runs, not when it is built.
// which: 0 rank, 1 size, 2 local_rank, 3 local_size, 4 cross_rank, 5 cross_size.
REGISTER_OP("TfdistTopology")
    .Output("value: int32")
    .Attr("which: int")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

}  // namespace tfdist
