"""Hand-written cases for the known defects of issue 21 (cases.KNOWN_DEFECTS).

Each checks the contract as it should be; test_differential.py expects them
to fail (xfail, strict) until the defect is fixed. ``CASES`` lists them
with the item they belong to and the smallest number of ranks at which the
defect can show.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

import tfdist
import reference as ref
from cases import DISAGREEMENTS
from compressors import TopKModel


def powersgd_after_zero(rank: int, size: int) -> Optional[str]:
    """A zero step must not stop PowerSGD: a rank-1 average afterwards is delivered exactly."""
    tfdist.runtime.restore_rank_state({})
    comp = tfdist.Compression.powersgd(1)
    zero = tf.zeros([6, 5])
    tfdist.allreduce(zero, op=tfdist.Average, name="dt.t1", compression=comp)
    u, v = np.arange(1.0, 7.0), np.linspace(-1.0, 1.0, 5)
    grad = (np.outer(u, v) * (rank + 1)).astype(np.float32)
    got = tfdist.allreduce(tf.constant(grad), op=tfdist.Average, name="dt.t1",
                           compression=comp).numpy()
    expected = np.outer(u, v) * (size + 1) / 2
    return ref.compare(got.astype(np.float64), expected, "PowerSGD step after a zero step",
                       1e-4 * np.max(np.abs(expected)))


def unnamed_topk(rank: int, size: int) -> Optional[str]:
    """Two unnamed top-k allreduces keep apart: B's result owes nothing to A's residual
    (or unnamed compressed calls are refused with an error that says to pass name=)."""
    tfdist.runtime.restore_rank_state({})
    comp = tfdist.Compression.topk(0.25)
    a = np.full(8, 100.0, np.float32) * (rank + 1)
    b = ((np.arange(8) + 1) * (rank + 1)).astype(np.float32)
    try:
        tfdist.allreduce(tf.constant(a), op=tfdist.Sum, compression=comp)
        got = tfdist.allreduce(tf.constant(b), op=tfdist.Sum, compression=comp).numpy()
    except (ValueError, tf.errors.InvalidArgumentError) as error:
        return None if "name" in str(error) else f"raised without naming name=: {error}"
    case = dict(params=dict(ratio=0.25, error_feedback=True, momentum=0.0, start_step=0),
                shapes=[(8,)], dtypes=["float32"], op="Sum", pre=1.0, post=1.0,
                inputs=["random"], grouped=False, id="t2")
    model = TopKModel(case, size)
    model.current = 0
    expected, tol = model.step([[((np.arange(8) + 1) * (r + 1)).astype(np.float32)]
                                for r in range(size)], rank)[0]
    return ref.compare(got, expected, "unnamed top-k allreduce B after A", tol)


def many_dims_state(rank: int, size: int) -> Optional[str]:
    """rank_state() keeps the shape of a residual of more than 8 dimensions."""
    tfdist.runtime.restore_rank_state({})
    shape = (1,) * 8 + (2, 3)
    x = tf.constant(np.arange(6.0, dtype=np.float32).reshape(shape) * (rank + 1))
    tfdist.allreduce(x, op=tfdist.Sum, name="dt.t3", compression=tfdist.Compression.topk(0.5))
    state = tfdist.runtime.rank_state()
    residual = state.get("topk.residual/dt.t3")
    if residual is None or residual.shape != shape:
        return f"rank_state() residual shape {None if residual is None else residual.shape}, " \
               f"expected {shape}"
    return None


def failed_restore_keeps_state(rank: int, size: int) -> Optional[str]:
    """A restore_rank_state() that fails leaves the state as it was."""
    before = {"topk.residual/dt.t4": np.arange(3, dtype=np.float32)}
    tfdist.runtime.restore_rank_state(before)
    try:
        tfdist.runtime.restore_rank_state({"topk.residual/dt.t4b": np.ones(2, np.float32),
                                           4: np.ones(2, np.float32)})
        return "restore_rank_state accepted a key that is not a string"
    except (TypeError, ValueError, AttributeError):
        pass
    after = tfdist.runtime.rank_state()
    if sorted(after) != sorted(before):
        return f"after a failed restore the state holds {sorted(after)}, was {sorted(before)}"
    return ref.compare(after["topk.residual/dt.t4"], before["topk.residual/dt.t4"],
                       "state after a failed restore")


def uncompressed_bytes(rank: int, size: int) -> Optional[str]:
    """bytes_uncompressed counts what a dense allreduce would have sent, at least
    2(P-1)/P of the tensor's bytes."""
    for label, comp, shape in (("topk(0.01)", tfdist.Compression.topk(0.01), (1000,)),
                               ("powersgd(1)", tfdist.Compression.powersgd(1), (64, 64))):
        before = tfdist.stats()["bytes_uncompressed"]
        x = tf.ones(shape) * (rank + 1)
        tfdist.allreduce(x, op=tfdist.Sum, name=f"dt.t6.{label}", compression=comp)
        delta = tfdist.stats()["bytes_uncompressed"] - before
        least = 2 * (size - 1) / size * 4 * int(np.prod(shape))
        if delta < least:
            return f"{label}: bytes_uncompressed grew by {delta}, a dense allreduce sends {least}"
    return None


def float64_rounded_once(rank: int, size: int) -> Optional[str]:
    """fp16 rounds a float64 value to 16 bits once (no detour through float32)."""
    x = 1.0 + 2.0 ** -11 + 2.0 ** -40  # above the tie: rounds up once, to even via float32
    value = np.array([x if rank == 0 else 0.0])
    got = tfdist.allreduce(tf.constant(value), op=tfdist.Sum, name="dt.t7",
                           compression=tfdist.Compression.fp16).numpy()
    return ref.compare(got, np.array([1.0 + 2.0 ** -10]), "fp16 of a float64 near a tie")


def warmup_count_survives_restore(rank: int, size: int) -> Optional[str]:
    """The call count of start_step continues across rank_state()/restore_rank_state()
    (a 0-d array; np.ascontiguousarray made it 1-d, and the count started again)."""
    tfdist.runtime.restore_rank_state({})
    comp = tfdist.Compression.powersgd(1, start_step=5)
    x = tf.ones([8, 8])
    for _ in range(2):
        tfdist.allreduce(x, op=tfdist.Sum, name="dt.t0", compression=comp)
        tfdist.runtime.restore_rank_state(tfdist.runtime.rank_state())
    count = tfdist.runtime.rank_state().get("step/powersgd/dt.t0")
    return ref.compare(np.asarray(count), np.array(2, np.int64),
                       f"start_step count after two calls, each followed by a restore "
                       f"(value {count!r})")


def sparse_gradient_compressed(rank: int, size: int) -> Optional[str]:
    """top-k compresses an IndexedSlices gradient too: what this rank sends for it is well
    under the (P-1)·values bytes of an uncompressed allgather of its rows."""
    from tfdist.gradient_tape import allreduce_gradients
    values = tf.constant(np.random.default_rng([3, rank]).standard_normal((200, 16)),
                         tf.float32)
    slices = tf.IndexedSlices(values, tf.range(200, dtype=tf.int64) % 50, tf.constant([50, 16]))
    before = tfdist.stats()["bytes_sent"]
    allreduce_gradients([slices], prefix="dt.t7s", compression=tfdist.Compression.topk(0.01))
    sent = tfdist.stats()["bytes_sent"] - before
    plain = (size - 1) * 200 * 16 * 4
    if sent >= plain / 2:
        return f"an IndexedSlices gradient under topk(0.01) sent {sent} bytes, " \
               f"an uncompressed allgather of its values {plain}"
    return None


#: (item of cases.KNOWN_DEFECTS or None, smallest np at which it can fail, function)
CASES = [(None, 1, warmup_count_survives_restore), (1, 1, powersgd_after_zero),
         (2, 2, unnamed_topk), (3, 1, many_dims_state), (4, 1, failed_restore_keeps_state),
         (6, 2, uncompressed_bytes),
         (7, 1, float64_rounded_once), (7, 2, sparse_gradient_compressed)]


def cases(size: int) -> list:
    return [dict(kind="targeted", item=item, function=f.__name__, id=f"t{item or ''}.{f.__name__}")
            for item, least, f in CASES if size >= least]


def run(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    return {f.__name__: f for _, _, f in CASES}[case["function"]](rank, size)


def disagreeing_settings(rank: int, size: int) -> None:
    """Ranks that pass different compressor settings under one name get an error that says
    so, on every rank (as a dtype mismatch is reported): no hang, no abort, no silent
    divergence. Each rank prints one line per setting it saw reported."""
    for label, make in DISAGREEMENTS.items():
        comp = make(tfdist.Compression)[0 if rank == 0 else 1]
        try:
            tfdist.allreduce(tf.ones([64, 64]) * (rank + 1), op=tfdist.Sum,
                             name=f"dt.t5.{label}", compression=comp)
        except (tf.errors.FailedPreconditionError, tf.errors.InvalidArgumentError,
                ValueError) as error:
            message = str(error)
            if "disagree" in message:
                print(f"[rank {rank}] disagreement reported: {label}", flush=True)
            else:
                print(f"[rank {rank}] {label}: error does not name the disagreement: "
                      f"{message[:300]}", flush=True)
            continue
        print(f"[rank {rank}] {label}: no error", flush=True)
