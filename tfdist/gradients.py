"""Gradients of the collectives, so that they can sit inside a differentiated model."""
from __future__ import annotations

import tensorflow as tf

from tfdist import ops, runtime


def _derived_name(op: tf.Operation, suffix: str):
    name = op.get_attr("tensor_name")  # bytes
    if isinstance(name, bytes):
        name = name.decode()
    return f"{name}/{suffix}" if name else None


@tf.RegisterGradient("TfdistAllreduce")
def _allreduce_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    # y = post * reduce(pre * x_r): for Sum and Average, dy/dx_r is the same
    # reduction of the incoming gradients with the same factors.
    reduce_op = ops.ReduceOp(op.get_attr("reduce_op"))
    if reduce_op not in (ops.Sum, ops.Average):
        raise NotImplementedError(
            f"tfdist.allreduce with op={reduce_op.name} has no gradient; use Sum or Average")
    return ops.wire_allreduce(grad, op=reduce_op, name=_derived_name(op, "grad"),
                              prescale_factor=float(op.get_attr("prescale_factor")),
                              postscale_factor=float(op.get_attr("postscale_factor")),
                              wire_code=op.get_attr("compression"))


@tf.RegisterGradient("TfdistAllgather")
def _allgather_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    # Every rank's output holds this rank's rows: their gradient is the sum of
    # all ranks' gradients for those rows.
    name = _derived_name(op, "grad")
    summed = ops.allreduce(grad, op=ops.Sum, name=name)
    rows = tf.shape(op.inputs[0], out_type=tf.int64)[:1]
    all_rows = ops.allgather(rows, name=f"{name}/rows" if name else None)
    start = tf.reduce_sum(all_rows[:runtime.rank()])
    return summed[start:start + rows[0]]


@tf.RegisterGradient("TfdistBroadcast")
def _broadcast_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    # Only the root's input reaches the outputs: it gets the sum of all
    # ranks' gradients, the other ranks' inputs get zero.
    summed = ops.allreduce(grad, op=ops.Sum, name=_derived_name(op, "grad"))
    if runtime.rank() == op.get_attr("root_rank"):
        return summed
    return tf.zeros_like(summed)


@tf.RegisterGradient("TfdistGroupedAllreduce")
def _grouped_allreduce_grad(op: tf.Operation, *grads: tf.Tensor) -> list:
    reduce_op = ops.ReduceOp(op.get_attr("reduce_op"))
    if reduce_op not in (ops.Sum, ops.Average):
        raise NotImplementedError(
            f"tfdist.grouped_allreduce with op={reduce_op.name} has no gradient; "
            "use Sum or Average")
    grads = [tf.zeros_like(x) if g is None else g for g, x in zip(grads, op.inputs)]
    return ops.wire_grouped_allreduce(grads, op=reduce_op, name=_derived_name(op, "grad"),
                                      prescale_factor=float(op.get_attr("prescale_factor")),
                                      postscale_factor=float(op.get_attr("postscale_factor")),
                                      wire_code=op.get_attr("compression"))
