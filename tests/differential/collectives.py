"""Runs one generated collective case on this rank and checks it against reference.py.

``run(case, rank, size)`` returns None when the case meets its contract, or a
message saying what differs. Every rank runs every case in the same order.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

import tfdist
import reference as ref

OPS = {"Sum": tfdist.Sum, "Average": tfdist.Average, "Min": tfdist.Min, "Max": tfdist.Max,
       "Product": tfdist.Product}


def _call(case: Dict[str, Any], body: Callable[..., Any], *tensors: tf.Tensor) -> Any:
    """``body(*tensors)`` eagerly or in a tf.function, as the case says."""
    if case["mode"] == "function":
        return tf.function(body)(*tensors)
    return body(*tensors)


def _name(case: Dict[str, Any]) -> Optional[str]:
    return f"dt.{case['id']}" if case["naming"] == "named" else None


def _numpy(tensor: tf.Tensor) -> np.ndarray:
    return tensor.numpy()


def _exponent(case: Dict[str, Any]) -> int:
    return int(np.random.default_rng([case["seed"], 7]).integers(-3, 4))


def _reduction_inputs(case: Dict[str, Any], dtype: str, shape, size: int,
                      salt: int = 0) -> List[np.ndarray]:
    return [ref.reduction_input(dtype, case["op"], shape, case["values"], case["pre"],
                                case["post"], ref.rng(case, r, salt), _exponent(case))
            for r in range(size)]


def _check_reduction(got: np.ndarray, inputs: List[np.ndarray], dtype: str,
                     case: Dict[str, Any], what: str, rows=None) -> Optional[str]:
    expected = ref.reduce(inputs, dtype, case["op"], case["pre"], case["post"])
    tol = None
    if not ref.reduction_is_exact(dtype, case["op"], case["pre"], case["post"], case["values"],
                                  len(inputs)):
        tol = ref.tolerance(inputs, dtype, case["op"], case["pre"], case["post"])
    if rows is not None:
        expected = expected[rows[0]:rows[1]]
        tol = None if tol is None else tol[rows[0]:rows[1]]
    return ref.compare(got, expected, what, tol)


def allreduce(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    inputs = _reduction_inputs(case, case["dtype"], case["shape"], size)
    x = tf.constant(inputs[rank])
    y = _call(case, lambda t: tfdist.allreduce(
        t, op=OPS[case["op"]], name=_name(case), prescale_factor=case["pre"],
        postscale_factor=case["post"], algorithm=case["algorithm"]), x)
    return _check_reduction(_numpy(y), inputs, case["dtype"], case, "allreduce")


def grouped_allreduce(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    inputs = [_reduction_inputs(case, d, s, size, salt=i)
              for i, (d, s) in enumerate(zip(case["dtypes"], case["shapes"]))]
    xs = [tf.constant(member[rank]) for member in inputs]
    ys = _call(case, lambda *ts: tfdist.grouped_allreduce(
        list(ts), op=OPS[case["op"]], name=_name(case), prescale_factor=case["pre"],
        postscale_factor=case["post"], algorithm=case["algorithm"]), *xs)
    if len(ys) != len(xs):
        return f"grouped_allreduce returned {len(ys)} tensors for {len(xs)}"
    for i, (y, member, dtype) in enumerate(zip(ys, inputs, case["dtypes"])):
        error = _check_reduction(_numpy(y), member, dtype, case, f"grouped_allreduce[{i}]")
        if error:
            return error
    return None


def allgather(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    inputs = [ref.data_input(case["dtype"], (case["rows"][r],) + tuple(case["row_shape"]),
                             ref.rng(case, r)) for r in range(size)]
    y = _call(case, lambda t: tfdist.allgather(t, name=_name(case)), tf.constant(inputs[rank]))
    return ref.compare(_numpy(y), np.concatenate(inputs, axis=0), "allgather")


def broadcast(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    root = case["root"] % size
    inputs = [ref.data_input(case["dtype"], case["shape"], ref.rng(case, r)) for r in range(size)]
    y = _call(case, lambda t: tfdist.broadcast(t, root_rank=root, name=_name(case)),
              tf.constant(inputs[rank]))
    return ref.compare(_numpy(y), inputs[root], f"broadcast from root {root}")


def alltoall(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    if case["even"]:
        splits = [[case["splits"][r][0]] * size for r in range(size)]
    else:
        splits = [list(case["splits"][r][:size]) for r in range(size)]
    inputs = [ref.data_input(case["dtype"], (sum(splits[r]),) + tuple(case["row_shape"]),
                             ref.rng(case, r)) for r in range(size)]
    mine = None if case["even"] else splits[rank]
    y, received = _call(case, lambda t: tfdist.alltoall(t, splits=mine, name=_name(case)),
                        tf.constant(inputs[rank]))
    pieces = []
    for j in range(size):
        start = sum(splits[j][:rank])
        pieces.append(inputs[j][start:start + splits[j][rank]])
    error = ref.compare(_numpy(y), np.concatenate(pieces, axis=0), f"alltoall splits={splits}")
    if error:
        return error
    return ref.compare(_numpy(received).astype(np.int64),
                       np.array([splits[j][rank] for j in range(size)], np.int64),
                       "alltoall received_splits")


def reducescatter(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    inputs = _reduction_inputs(case, case["dtype"], case["shape"], size)
    y = _call(case, lambda t: tfdist.reducescatter(
        t, op=OPS[case["op"]], name=_name(case), prescale_factor=case["pre"],
        postscale_factor=case["post"]), tf.constant(inputs[rank]))
    counts = ref.reducescatter_rows(case["shape"][0], size)
    start = sum(counts[:rank])
    return _check_reduction(_numpy(y), inputs, case["dtype"], case, "reducescatter",
                            rows=(start, start + counts[rank]))


def _member_inputs(case: Dict[str, Any], index: int, member: Dict[str, Any],
                   size: int) -> List[np.ndarray]:
    shape = tuple(member["shape"])
    if member["kind"] == "allgather":
        return [ref.data_input(member["dtype"], (shape[0] + r % 2,) + shape[1:],
                               ref.rng(case, r, index)) for r in range(size)]
    return [ref.reduction_input(member["dtype"], "Sum", shape, "exact", 1.0, 1.0,
                                ref.rng(case, r, index), 0) for r in range(size)]


def _member_op(case: Dict[str, Any], index: int, member: Dict[str, Any],
               size: int) -> Callable[[tf.Tensor], tf.Tensor]:
    name = f"dt.{case['id']}.{index}"
    if member["kind"] == "allreduce":
        return lambda t: tfdist.allreduce(t, op=tfdist.Sum, name=name)
    if member["kind"] == "allgather":
        return lambda t: tfdist.allgather(t, name=name)
    return lambda t: tfdist.broadcast(t, root_rank=member["root"] % size, name=name)


def _member_expected(member: Dict[str, Any], inputs: List[np.ndarray], size: int) -> np.ndarray:
    if member["kind"] == "allreduce":
        return ref.reduce(inputs, member["dtype"], "Sum", 1.0, 1.0)
    if member["kind"] == "allgather":
        return np.concatenate(inputs, axis=0)
    return inputs[member["root"] % size]


def ordering(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    """Named ops submitted in a different order on every rank."""
    members = case["members"]
    inputs = [_member_inputs(case, i, m, size) for i, m in enumerate(members)]
    order = np.random.default_rng([case["seed"], rank, 99]).permutation(len(members))
    ops = [_member_op(case, i, m, size) for i, m in enumerate(members)]
    xs = [tf.constant(member[rank]) for member in inputs]
    results: List[Any] = [None] * len(members)
    if case["mode"] == "function":
        @tf.function
        def body(*ts):
            out = [None] * len(ts)
            for i in order:  # creation order differs between ranks
                out[i] = ops[i](ts[i])
            return out
        results = list(body(*xs))
    else:
        errors: List[BaseException] = []

        def run_one(i: int) -> None:
            try:
                results[i] = ops[i](xs[i])
            except BaseException as error:  # noqa: BLE001 (reported below)
                errors.append(error)

        threads = [threading.Thread(target=run_one, args=(int(i),)) for i in order]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        if errors:
            raise errors[0]
        if any(t.is_alive() for t in threads):
            return "a thread's collective did not complete within 120 s"
    for i, member in enumerate(members):
        error = ref.compare(_numpy(results[i]), _member_expected(member, inputs[i], size),
                            f"member {i} ({member['kind']}), submitted in order "
                            f"{order.tolist()}")
        if error:
            return error
    return None


RUNNERS = {"allreduce": allreduce, "grouped_allreduce": grouped_allreduce,
           "allgather": allgather, "broadcast": broadcast, "alltoall": alltoall,
           "reducescatter": reducescatter, "ordering": ordering}


def run(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    return RUNNERS[case["kind"]](case, rank, size)
