"""Hand-written cases for the edge cases of issue 21 (docs/compression.md, "Edge cases:
what you get"), run in the same job as the generated ones and held to the same rule:
each must pass.

``CASES`` lists them with the smallest number of ranks at which they mean something.
``disagreeing_settings`` is the job of its own that test_differential.py runs for ranks
that disagree on the compressor.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

import tfdist
from tfdist.compression import stateful
import compressors
import reference as ref
from cases import DISAGREEMENTS


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


def powersgd_refill_follows_model(rank: int, size: int) -> Optional[str]:
    """Zero steps between others, with and without error feedback, from a restored and
    from the initial Q: every output and the final Q and residual as the model's refill
    rule (compressors.refill_q) says."""
    for seed, ef, rank_r in ((11, True, 2), (12, False, 3), (13, False, 1), (14, True, 3)):
        case = dict(kind="compress", compressor="powersgd",
                    params=dict(rank=rank_r, error_feedback=ef, start_step=0), op="Average",
                    pre=1.0, post=1.0, dtypes=["float32"], shapes=[(10, 9)],
                    inputs=["zero", "random", "zero", "rank_deficient", "zero", "random"],
                    grouped=False, mode="eager", seed=seed, id=f"t1.refill{seed}")
        failure = compressors.run(case, rank, size)
        if failure:
            return f"seed {seed} (error_feedback={ef}, rank {rank_r}): {failure}"
    return None


def unnamed_refused(rank: int, size: int) -> Optional[str]:
    """Top-k and PowerSGD without name= (or with two tensors of one name) raise a
    ValueError that asks for name=, before anything is sent or stored."""
    tfdist.runtime.restore_rank_state({})
    x = tf.ones([12, 10]) * (rank + 1)
    for comp in (tfdist.Compression.topk(0.25), tfdist.Compression.powersgd(1)):
        calls = {
            "allreduce": lambda: tfdist.allreduce(x, op=tfdist.Sum, compression=comp),
            "grouped_allreduce": lambda: tfdist.grouped_allreduce([x, x], op=tfdist.Sum,
                                                                  compression=comp),
            "a shared name": lambda: comp.allreduce([x, x], ["dt.t2", "dt.t2"], op=tfdist.Sum),
        }
        for what, call in calls.items():
            try:
                call()
            except ValueError as error:
                wanted = "'dt.t2'" if what == "a shared name" else "name="
                if wanted not in str(error):
                    return f"{comp!r} {what}: the ValueError does not say {wanted}: {error}"
                continue
            return f"{comp!r} {what}: accepted"
    if tfdist.runtime.rank_state():
        return f"refused calls left state {sorted(tfdist.runtime.rank_state())}"
    # The same call named goes through: the sum of ranks 1..P.
    got = tfdist.allreduce(x, op=tfdist.Sum, name="dt.t2.named",
                           compression=tfdist.Compression.topk(1.0)).numpy()
    return ref.compare(got, np.full((12, 10), size * (size + 1) / 2, np.float32),
                       "the named call after the refused ones")


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
    except (TypeError, ValueError):
        pass
    after = tfdist.runtime.rank_state()
    if sorted(after) != sorted(before):
        return f"after a failed restore the state holds {sorted(after)}, was {sorted(before)}"
    return ref.compare(after["topk.residual/dt.t4"], before["topk.residual/dt.t4"],
                       "state after a failed restore")


def _job_total(value: int, name: str) -> int:
    return int(tfdist.allreduce(tf.constant([value], tf.int64), op=tfdist.Sum,
                                name=name).numpy()[0])


def uncompressed_bytes(rank: int, size: int) -> Optional[str]:
    """bytes_uncompressed grows by what a dense allreduce of the same tensor sends, summed
    over the ranks (per rank the shares differ at a non-power-of-two size), plus the
    one-element settings allreduce the call starts with. The compressors count the dense
    call as a bandwidth-optimal allreduce (docs/compression.md), so the reference runs the
    ring: under auto it could be the butterfly, which sends log2(P) whole tensors."""
    for label, comp, shape in (("topk(0.01)", tfdist.Compression.topk(0.01), (1000,)),
                               ("powersgd(1)", tfdist.Compression.powersgd(1), (64, 64))):
        x = tf.ones(shape) * (rank + 1)
        before = tfdist.stats()["bytes_sent"]
        tfdist.allreduce(x, op=tfdist.Sum, name=f"dt.t6.dense.{label}", algorithm="ring")
        dense = _job_total(tfdist.stats()["bytes_sent"] - before, f"dt.t6.dense.{label}.total")
        before = tfdist.stats()["bytes_uncompressed"]
        tfdist.allreduce(x, op=tfdist.Sum, name=f"dt.t6.{label}", compression=comp)
        delta = _job_total(tfdist.stats()["bytes_uncompressed"] - before, f"dt.t6.{label}.total")
        if not abs(delta - dense) <= 0.02 * dense + 64 * size:
            return (f"{label}: bytes_uncompressed grew by {delta} over the ranks, a dense "
                    f"allreduce of the tensor sent {dense}")
    return None


def float64_rounded_once(rank: int, size: int) -> Optional[str]:
    """fp16 and bf16 round a float64 value to 16 bits once (no detour through float32,
    where a value just above a tie became the tie and then rounded to even)."""
    for comp, x, expected in (
            (tfdist.Compression.fp16, 1.0 + 2.0 ** -11 + 2.0 ** -40, 1.0 + 2.0 ** -10),
            (tfdist.Compression.bf16, 1.0 + 2.0 ** -8 + 2.0 ** -40, 1.0 + 2.0 ** -7)):
        value = np.array([x if rank == 0 else 0.0])
        got = tfdist.allreduce(tf.constant(value), op=tfdist.Sum, name=f"dt.t7.{comp.name}",
                               compression=comp).numpy()
        failure = ref.compare(got, np.array([expected]), f"{comp.name} of a float64 near a tie")
        if failure:
            return failure
    return None


def _caught(call) -> List[str]:
    """The texts of the warnings ``call`` issues, every one recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught]


def float64_warns_once(rank: int, size: int) -> Optional[str]:
    """top-k and PowerSGD round float64 tensors they compress to float32 and sum them
    there, saying so in one UserWarning per process; PowerSGD's uncompressed float64
    tensors stay float64 and do not warn."""
    tfdist.runtime.restore_rank_state({})
    stateful.warn_once.cache_clear()  # earlier cases have warned already
    fine = 1.0 + 2.0 ** -30  # float32 rounds it to 1.0
    x = np.array([fine, 2.0 + rank, 0.5 * rank, -3.0])
    results: List[np.ndarray] = []

    def topk_twice() -> None:
        for step in range(2):
            results.append(tfdist.allreduce(tf.constant(x), op=tfdist.Sum, name=f"dt.t7f.{step}",
                                            compression=tfdist.Compression.topk(1.0)).numpy())

    texts = _caught(topk_twice)
    f64 = [t for t in texts if "float64" in t]
    if len(f64) != 1 or "float32" not in f64[0] or "cast back" not in f64[0]:
        return f"two float64 top-k calls warned {f64} (all warnings: {texts})"
    all_x = [np.array([fine, 2.0 + r, 0.5 * r, -3.0]) for r in range(size)]
    expected = np.sum([a.astype(np.float32) for a in all_x], axis=0, dtype=np.float32)
    for got in results:
        failure = ref.compare(got, expected.astype(np.float64),
                              "top-k float64 sum (in float32, as documented)")
        if failure:
            return failure

    vector = np.array([fine * (rank + 1), 1.0])
    texts = _caught(lambda: results.append(tfdist.allreduce(
        tf.constant(vector), op=tfdist.Sum, name="dt.t7f.vector",
        compression=tfdist.Compression.powersgd(1)).numpy()))
    if any("float64" in t for t in texts):
        return f"PowerSGD of a float64 vector (sent uncompressed) warned: {texts}"
    exact = np.sum([np.array([fine * (r + 1), 1.0]) for r in range(size)], axis=0)
    failure = ref.compare(results[-1], exact, "PowerSGD's uncompressed float64 vector")
    if failure:
        return failure
    matrix = np.ones((16, 12)) * (rank + 1)
    texts = _caught(lambda: [tfdist.allreduce(tf.constant(matrix), op=tfdist.Sum,
                                              name=f"dt.t7f.matrix{step}",
                                              compression=tfdist.Compression.powersgd(1))
                             for step in range(2)])
    if sum("float64" in t for t in texts) != 1:
        return f"two float64 PowerSGD calls on a matrix warned {texts}"
    tfdist.runtime.restore_rank_state({})
    return None


def sparse_gradient_uncompressed(rank: int, size: int) -> Optional[str]:
    """An IndexedSlices gradient under top-k or PowerSGD is allgathered as it is (one
    UserWarning per process says so): every rank's rows and indices, in rank order."""
    from tfdist.gradient_tape import allreduce_gradients
    stateful.warn_once.cache_clear()
    rows = lambda r: np.random.default_rng([3, r]).standard_normal((20, 4)).astype(np.float32)
    index = lambda r: (np.arange(20, dtype=np.int64) * (r + 3)) % 50
    for comp in (tfdist.Compression.topk(0.01), tfdist.Compression.powersgd(1)):
        slices = tf.IndexedSlices(tf.constant(rows(rank)), tf.constant(index(rank)),
                                  tf.constant([50, 4], tf.int64))
        before = tfdist.stats()["bytes_sent"]
        outputs = []
        texts = _caught(lambda: outputs.extend(
            allreduce_gradients([slices], prefix=f"dt.t7s.{comp.name}.{step}", op=tfdist.Sum,
                                compression=comp)[0] for step in range(2)))
        sent = tfdist.stats()["bytes_sent"] - before
        sparse = [t for t in texts if "IndexedSlices" in t]
        if len(sparse) != 1 or "uncompressed" not in sparse[0]:
            return f"{comp!r}: two IndexedSlices calls warned {sparse} (all: {texts})"
        for out in outputs:
            if not isinstance(out, tf.IndexedSlices):
                return f"{comp!r}: an IndexedSlices gradient came back as {type(out).__name__}"
            failure = (ref.compare(out.values.numpy(),
                                   np.concatenate([rows(r) for r in range(size)]),
                                   f"{comp!r} gathered rows")
                       or ref.compare(out.indices.numpy(),
                                      np.concatenate([index(r) for r in range(size)]),
                                      f"{comp!r} gathered indices"))
            if failure:
                return failure
        if size > 1 and sent < 2 * (size - 1) * 20 * 4 * 4:
            return f"{comp!r}: sent {sent} bytes, less than an uncompressed allgather of the rows"
    return None


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


#: (the number of issue 21's defect it guards, or None; smallest np; function). Defect 8
#: (ranks that disagree on a compressor) is ``disagreeing_settings``, a job of its own.
CASES = [(None, 1, warmup_count_survives_restore), (1, 1, powersgd_after_zero),
         (1, 1, powersgd_refill_follows_model), (2, 1, unnamed_refused),
         (6, 2, many_dims_state), (7, 1, failed_restore_keeps_state),
         (9, 2, uncompressed_bytes), (12, 1, float64_rounded_once), (12, 1, float64_warns_once),
         (12, 2, sparse_gradient_uncompressed)]


def cases(size: int) -> list:
    return [dict(kind="targeted", item=item, function=f.__name__, id=f"t{item or ''}.{f.__name__}")
            for item, least, f in CASES if size >= least]


def run(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    return {f.__name__: f for _, _, f in CASES}[case["function"]](rank, size)


def disagreeing_settings(rank: int, size: int) -> None:
    """Ranks that pass different compressors or settings under one name (rank 0 one,
    the others another) all get the runtime's FailedPreconditionError naming the
    setting and both values, and the next collective works: no hang, no abort, no
    silent divergence. Each rank prints one line per disagreement that met all that."""
    for label, (first, other, words, grouped) in DISAGREEMENTS.items():
        comp = (first if rank == 0 else other)(tfdist.Compression)
        x = tf.ones([64, 64]) * (rank + 1)
        try:
            if grouped:
                tfdist.grouped_allreduce([x, x[:3], x[:5, :7]], op=tfdist.Sum,
                                         name=f"dt.t5.{label}", compression=comp)
            else:
                tfdist.allreduce(x, op=tfdist.Sum, name=f"dt.t5.{label}", compression=comp)
        except tf.errors.FailedPreconditionError as error:
            message = str(error)
            missing = [w for w in ["disagree", f"'dt.t5.{label}"] + words if w not in message]
            if missing:
                print(f"[rank {rank}] {label}: the error lacks {missing}: {message[:400]}",
                      flush=True)
                continue
        except Exception as error:  # noqa: BLE001 (reported, not raised: see the test)
            print(f"[rank {rank}] {label}: raised {type(error).__name__}: {error}"[:500],
                  flush=True)
            continue
        else:
            print(f"[rank {rank}] {label}: no error", flush=True)
            continue
        after = tfdist.allreduce(tf.constant([rank + 1.0]), op=tfdist.Sum,
                                 name=f"dt.t5.after.{label}").numpy()
        failure = ref.compare(after, np.array([size * (size + 1) / 2], np.float32),
                              "the allreduce after the error")
        if failure:
            print(f"[rank {rank}] {label}: {failure}", flush=True)
            continue
        print(f"[rank {rank}] disagreement reported: {label}", flush=True)
