"""Gradients of the collectives, so that they can sit inside a differentiated model."""
from __future__ import annotations

import tensorflow as tf

from tfdist import ops
from tfdist.process_sets import ProcessSet, by_id


def _set(op: tf.Operation) -> ProcessSet:
    """The process set ``op`` ran on: its gradient runs on the same one."""
    return by_id(op.get_attr("process_set_id"))


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
    return ops.allreduce_with_cast(grad, op=reduce_op, name=_derived_name(op, "grad"),
                                   prescale_factor=float(op.get_attr("prescale_factor")),
                                   postscale_factor=float(op.get_attr("postscale_factor")),
                                   cast_code=op.get_attr("compression"),
                                   process_set=_set(op))


@tf.RegisterGradient("TfdistAllgather")
def _allgather_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    # Every rank's output holds this rank's rows: their gradient is the sum of
    # all ranks' gradients for those rows.
    name = _derived_name(op, "grad")
    summed = ops.allreduce(grad, op=ops.Sum, name=name, process_set=_set(op))
    rows = tf.shape(op.inputs[0], out_type=tf.int64)[:1]
    all_rows = ops.allgather(rows, name=f"{name}/rows" if name else None, process_set=_set(op))
    start = tf.reduce_sum(all_rows[:_set(op).rank()])
    return summed[start:start + rows[0]]


@tf.RegisterGradient("TfdistBroadcast")
def _broadcast_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    # Only the root's input reaches the outputs: it gets the sum of all
    # ranks' gradients, the other ranks' inputs get zero.
    summed = ops.allreduce(grad, op=ops.Sum, name=_derived_name(op, "grad"),
                           process_set=_set(op))
    if _set(op).rank() == op.get_attr("root_rank"):  # both within the set
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
    return ops.grouped_allreduce_with_cast(grads, op=reduce_op, name=_derived_name(op, "grad"),
                                           prescale_factor=float(op.get_attr("prescale_factor")),
                                           postscale_factor=float(op.get_attr("postscale_factor")),
                                           cast_code=op.get_attr("compression"),
                                   process_set=_set(op))


def _rows_start(op: tf.Operation, index: int, name):
    """This rank's rows of allgather input ``index``: where they start in the output, and how
    many there are."""
    rows = tf.shape(op.inputs[index], out_type=tf.int64)[:1]
    all_rows = ops.allgather(rows, name=f"{name}/rows" if name else None, process_set=_set(op))
    return tf.reduce_sum(all_rows[:_set(op).rank()]), rows[0]


@tf.RegisterGradient("TfdistGroupedAllgather")
def _grouped_allgather_grad(op: tf.Operation, *grads: tf.Tensor) -> list:
    # As for one allgather, member by member: the summed gradient of this
    # rank's rows; the sums go as one grouped allreduce.
    name = _derived_name(op, "grad")
    grads = [tf.zeros_like(y) if g is None else g for g, y in zip(grads, op.outputs)]
    summed = ops.grouped_allreduce(grads, op=ops.Sum, name=name, process_set=_set(op))
    result = []
    for i, total in enumerate(summed):
        start, rows = _rows_start(op, i, f"{name}/{i}" if name else None)
        result.append(total[start:start + rows])
    return result


def _reducescatter_factor(op: tf.Operation) -> float:
    # y_r = post * reduce(pre * x_q)[rows of r]: for Sum and Average, dy/dx_q
    # gathers every rank's output gradient, times the same factors.
    reduce_op = ops.ReduceOp(op.get_attr("reduce_op"))
    if reduce_op not in (ops.Sum, ops.Average):
        raise NotImplementedError(
            f"tfdist reducescatter with op={reduce_op.name} has no gradient; use Sum or Average")
    factor = float(op.get_attr("prescale_factor")) * float(op.get_attr("postscale_factor"))
    return factor / _set(op).size() if reduce_op == ops.Average else factor


def _scaled(tensor: tf.Tensor, factor: float) -> tf.Tensor:
    return tensor if factor == 1.0 else tensor * tf.cast(factor, tensor.dtype)


@tf.RegisterGradient("TfdistReducescatter")
def _reducescatter_grad(op: tf.Operation, grad: tf.Tensor) -> tf.Tensor:
    factor = _reducescatter_factor(op)
    return _scaled(ops.allgather(grad, name=_derived_name(op, "grad"), process_set=_set(op)),
                   factor)


@tf.RegisterGradient("TfdistGroupedReducescatter")
def _grouped_reducescatter_grad(op: tf.Operation, *grads: tf.Tensor) -> list:
    factor = _reducescatter_factor(op)
    grads = [tf.zeros_like(y) if g is None else g for g, y in zip(grads, op.outputs)]
    gathered = ops.grouped_allgather(grads, name=_derived_name(op, "grad"),
                                     process_set=_set(op))
    return [_scaled(g, factor) for g in gathered]
