"""``Compression.auto()``: per call, none, bf16 (or fp16) or PowerSGD, by measured cost.

Each call of the compressor (one tensor group: what ``DistributedOptimizer``
submits as one grouped allreduce, or one ``tfdist.allreduce``) is sent the
way that is predicted to take least time, from two measurements nobody has
to supply:

- the link: the cost model's step curves, measured at ``init()`` and the
  same on every rank (``tfdist.runtime.predict_allreduce_seconds``; the
  fastest modelled algorithm for the byte count, which is what "auto" runs);
- the compressors' own work on this machine, measured once per process
  set at first use (``measure_costs``): the runtime's 16-bit round-and-widen
  loops per byte (``tfdist_wire_cast_seconds``, cc/tf/compression_cost_api.cc)
  and PowerSGD's products and orthogonalisation on two matrices (a fixed
  cost per tensor plus a cost per byte). Every rank's numbers are
  allreduced with Max, so every rank decides on the same, slowest, figures.

``predicted_seconds`` and ``choose`` are the decision rule, pure functions of
those numbers and the tensors' static shapes (docs/compression.md,
"Compression.auto"). Because every input is agreed, every rank chooses
alike; the choice is still checked once per group (one small allreduce)
and a disagreement raises on every rank instead of deadlocking. The chosen
compressor then runs the call unchanged (same collective names, same
state), so the result is that compressor's, bit for bit, and its own
cross-rank checks apply.
"""
from __future__ import annotations

import ctypes
import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfdist import _communicator, _library, ops, runtime
from tfdist.compression import stateful
from tfdist.compression.base import Compressor
from tfdist.compression.casts import BF16Compressor, FP16Compressor
from tfdist.compression.powersgd import PowerSGDCompressor, _matrix_view
from tfdist.compression.stateful import dense_wire_bytes
from tfdist.process_sets import GLOBAL_ID, process_set_id, size_of

#: What auto chooses between; "fp16" may stand in for "bf16" (``half=``).
CHOICES = ("none", "bf16", "fp16", "powersgd")
_CODES = {name: code for code, name in enumerate(CHOICES, start=1)}
#: Bytes of the buffer the cast cost is timed on (past the caches' small sizes).
_CAST_PROBE_BYTES = 4 << 20
#: The two matrices PowerSGD's work is timed on: (rows, columns).
_POWERSGD_PROBES = ((64, 64), (512, 128))
_REPETITIONS = 5
#: The 16-bit cast is chosen only when predicted at most this share of none's time:
#: it loses precision, and a saving within the cost model's error (about 10%,
#: docs/cost_model.md) may not be one.
HALF_GAIN = 0.9


@dataclass(frozen=True)
class CompressionCosts:
    """What compressing costs on the slowest rank (seconds).

    ``cast_per_byte``: rounding a float32 byte to 16 bits and widening it back
    (the runtime's wire cast, once each way per element). ``powersgd_fixed``
    and ``powersgd_per_byte``: PowerSGD's work on one tensor of b float32
    bytes is ``powersgd_fixed + powersgd_per_byte * b`` (residual add, M·Q,
    orthogonalisation, Mᵀ·P̂, P̂·Qᵀ and the new residual), at the rank it runs.
    """

    cast_per_byte: float
    powersgd_fixed: float
    powersgd_per_byte: float


@dataclass(frozen=True)
class TensorSpec:
    """What the decision needs of one tensor: its static shape (None: not fully
    known), its bytes per element and whether it is floating point."""

    shape: Optional[Tuple[int, ...]]
    itemsize: int
    floating: bool

    @classmethod
    def of(cls, tensor: tf.Tensor) -> "TensorSpec":
        """The spec of a tensor (eager or symbolic)."""
        shape = tuple(tensor.shape.as_list()) if tensor.shape.is_fully_defined() else None
        return cls(shape, tensor.dtype.size, tensor.dtype.is_floating)

    @property
    def elements(self) -> int:
        return int(math.prod(self.shape)) if self.shape is not None else 0


def powersgd_factors(spec: TensorSpec, rank: int) -> Optional[Tuple[int, int]]:
    """(n, m) when PowerSGD of ``rank`` sends this tensor as factors (PowerSGDCompressor's
    rule: floating, rank >= 2 and (n+m)·r·2 < n·m), else None."""
    if not spec.floating or spec.shape is None or len(spec.shape) < 2:
        return None
    n, m = _matrix_view(spec.shape)
    return (n, m) if n > 0 and m > 0 and (n + m) * rank * 2 < n * m else None


def predicted_seconds(specs: Sequence[TensorSpec], allreduce_seconds: Callable[[int], float],
                      costs: CompressionCosts, powersgd_rank: int) -> Dict[str, float]:
    """The predicted time of one call of ``specs`` sent each way.

    ``allreduce_seconds(b)`` is the link's time for an allreduce of b bytes
    (0 for 0 bytes). With W(x) the bytes each way puts on the wire:

    - none: A(Σ bytes);
    - bf16 / fp16: A(Σ 2·n over tensors of 4- or 8-byte floats + the others' bytes)
      + cast_per_byte · Σ 4·n over those tensors;
    - powersgd: A(Σ 4·n·r over factored tensors + the others' bytes) + A(Σ 4·m·r)
      + Σ (powersgd_fixed + powersgd_per_byte · 4·n·m) over factored tensors;
      ``inf`` when it would factor nothing. (Its settings check, one-element
      allreduces with no inputs, runs under the forward and backward passes.)

    Any tensor of unknown shape makes every choice but none ``inf``.
    """
    def wire(nbytes: float) -> float:
        return allreduce_seconds(int(nbytes)) if nbytes > 0 else 0.0

    if any(s.shape is None for s in specs):
        return {"none": 0.0, "half": math.inf, "powersgd": math.inf}
    dense = sum(s.elements * s.itemsize for s in specs)
    cast = [s for s in specs if s.floating and s.itemsize >= 4]
    half_bytes = dense - sum(s.elements * (s.itemsize - 2) for s in cast)
    half = wire(half_bytes) + costs.cast_per_byte * sum(4 * s.elements for s in cast)
    factored = [(s, powersgd_factors(s, powersgd_rank)) for s in specs]
    if not any(f for _, f in factored):
        powersgd = math.inf
    else:
        p_bytes = sum(4 * f[0] * powersgd_rank if f else s.elements * s.itemsize
                      for s, f in factored)
        q_bytes = sum(4 * f[1] * powersgd_rank for _, f in factored if f)
        work = sum(costs.powersgd_fixed + costs.powersgd_per_byte * 4 * f[0] * f[1]
                   for _, f in factored if f)
        powersgd = wire(p_bytes) + wire(q_bytes) + work
    return {"none": wire(dense), "half": half, "powersgd": powersgd}


def choose(predicted: Dict[str, float], candidates: Sequence[str],
           powersgd_gain: float) -> str:
    """The choice for one call: none, or the 16-bit cast where it is predicted to take at
    most ``HALF_GAIN`` of none's time; then PowerSGD instead where it is predicted to
    take at most ``powersgd_gain`` of that choice's. Only ``candidates`` ("none",
    "half", "powersgd") are considered."""
    dense = [c for c in ("none", "half") if c in candidates]
    if not dense:
        return "powersgd"
    best = dense[0]
    if dense == ["none", "half"] and predicted["half"] <= HALF_GAIN * predicted["none"]:
        best = "half"
    if "powersgd" in candidates and predicted["powersgd"] <= powersgd_gain * predicted[best]:
        return "powersgd"
    return best


def fastest_allreduce_seconds(nbytes: int) -> float:
    """The cost model's time for an allreduce of ``nbytes`` on this job: the fastest
    modelled algorithm (what "auto" aims for), from curves every rank shares."""
    if nbytes <= 0:
        return 0.0
    times = [runtime.predict_allreduce_seconds(nbytes, name)
             for name in _library.allreduce_algorithms() if name not in ("auto", "mpi")]
    finite = [t for t in times if math.isfinite(t)]
    return min(finite) if finite else math.inf


def _wire_cast_seconds(cast_code: int, nbytes: int, repetitions: int) -> float:
    lib = _library.control()
    function = lib.tfdist_wire_cast_seconds
    function.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_int]
    function.restype = ctypes.c_double
    seconds = function(cast_code, nbytes, repetitions)
    if seconds < 0:
        raise ValueError(f"tfdist_wire_cast_seconds({cast_code}, {nbytes}, {repetitions}): "
                         "bad argument")
    return seconds


def _powersgd_step() -> Tuple[Callable[..., Any], Callable[..., Any]]:
    """PowerSGD's local work on one matrix as a tf.function of any shape (traced once),
    and a function of the same arguments that does nothing, to time the cost of the call
    itself: in a training step the work runs inside the step's own function."""
    library = _library.ops()
    spec = [tf.TensorSpec([None, None], tf.float32)] * 3

    @tf.function(autograph=False, input_signature=spec)
    def step(gradient: tf.Tensor, residual: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        matrix = gradient + residual
        p_hat = library.tfdist_orthogonalize(tf.matmul(matrix, q))
        q_new = tf.matmul(matrix, p_hat, transpose_a=True)
        approximation = tf.matmul(p_hat, q_new, transpose_b=True)
        return tf.reduce_sum(matrix - approximation)

    @tf.function(autograph=False, input_signature=spec)
    def call_only(gradient: tf.Tensor, residual: tf.Tensor, q: tf.Tensor) -> tf.Tensor:
        return tf.constant(0.0)

    return step, call_only


def _best_seconds(run: Callable[[], Any], repetitions: int) -> float:
    run()  # traces, pages in
    best = math.inf
    for _ in range(repetitions):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


@functools.lru_cache(maxsize=None)
def local_costs(cast_code: int, powersgd_rank: int,
                repetitions: int = _REPETITIONS) -> CompressionCosts:
    """This rank's own ``CompressionCosts`` (no communication), timed at the first call in
    this process and kept: the machine does not change, and every new compressor (each
    Keras optimizer makes its own) would otherwise pay the timing again (0.1-0.3 s)."""
    cast = _wire_cast_seconds(cast_code, _CAST_PROBE_BYTES, repetitions) / _CAST_PROBE_BYTES
    step, call_only = _powersgd_step()
    points = []
    generator = np.random.default_rng(0)
    for n, m in _POWERSGD_PROBES:
        gradient = tf.constant(generator.standard_normal((n, m)), tf.float32)
        residual = tf.zeros([n, m])
        q = tf.constant(generator.standard_normal((m, powersgd_rank)), tf.float32)
        seconds = _best_seconds(lambda: step(gradient, residual, q).numpy(), repetitions)
        call = _best_seconds(lambda: call_only(gradient, residual, q).numpy(), repetitions)
        points.append((4 * n * m, max(0.0, seconds - call)))
    (b0, t0), (b1, t1) = points
    per_byte = max(0.0, (t1 - t0) / (b1 - b0))
    fixed = max(0.0, t0 - per_byte * b0)
    return CompressionCosts(cast, fixed, per_byte)


def agreed_costs(local: CompressionCosts, name: str, process_set: Any = None) -> CompressionCosts:
    """``local`` allreduced with Max over the ranks (of ``process_set``): every rank
    gets the slowest rank's figures, which set the pace of a collective anyway.

    The collective is named ``name``, the name of the first collective of the call
    that asked: a rank that sends that call without Compression.auto meets it there
    with another op (Max, which compression never uses) and every rank gets the
    runtime's FailedPreconditionError instead of waiting for each other.
    """
    values = tf.constant([local.cast_per_byte, local.powersgd_fixed, local.powersgd_per_byte],
                         tf.float64)
    extra = {} if process_set is None else {"process_set": process_set}
    agreed = _agreed(lambda: ops.allreduce(values, op=ops.Max, name=name, **extra), name)
    return CompressionCosts(*(float(v) for v in agreed))


def _agreed(collective: Callable[[], tf.Tensor], name: str) -> np.ndarray:
    """The eager ``collective()``'s value; a mismatch between ranks says what to look for."""
    try:
        return collective().numpy()
    except tf.errors.FailedPreconditionError as error:
        raise tf.errors.FailedPreconditionError(
            None, None, f"Compression.auto: the ranks' calls of {name!r} differ; every rank "
            f"must send it with Compression.auto and the same settings ({error.message})"
        ) from error


@dataclass(frozen=True)
class Decision:
    """One group's choice and what it was based on."""

    choice: str
    predicted_seconds: Dict[str, float]
    signature: Tuple[Any, ...]


class AutoCompressor(Compressor):
    """Chooses none, bf16 (or fp16) or PowerSGD per call; see ``Compression.auto``."""

    name = "auto"
    takes_process_set = True  # PowerSGD is left out of the choice on a process set

    def __init__(self, powersgd_rank: int = 2, half: str = "bf16",
                 candidates: Sequence[str] = ("none", "half", "powersgd"),
                 powersgd_gain: float = 0.8) -> None:
        if half not in ("bf16", "fp16"):
            raise ValueError(f"Compression.auto: half must be 'bf16' or 'fp16', got {half!r}")
        if isinstance(candidates, str) or not candidates:
            raise ValueError("Compression.auto: candidates must be a non-empty list of "
                             f"'none', 'half' and 'powersgd', got {candidates!r}")
        # "bf16" and "fp16" name the 16-bit cast too ("half": whichever `half` says).
        normalized = ["half" if c in ("bf16", "fp16") else c for c in candidates]
        unknown = [c for c in normalized if c not in ("none", "half", "powersgd")]
        if unknown or len(set(normalized)) != len(normalized):
            raise ValueError("Compression.auto: candidates must be distinct names among "
                             f"'none', 'half' (or 'bf16'/'fp16') and 'powersgd', got "
                             f"{list(candidates)!r}")
        candidates = normalized
        if (isinstance(powersgd_gain, bool) or not isinstance(powersgd_gain, (int, float))
                or not 0.0 < float(powersgd_gain) <= 1.0):
            raise ValueError("Compression.auto: powersgd_gain must be a number in (0, 1], "
                             f"got {powersgd_gain!r}")
        self.powersgd = PowerSGDCompressor(powersgd_rank)
        self.powersgd_rank = self.powersgd.rank
        self.half_name = half
        self.half = BF16Compressor() if half == "bf16" else FP16Compressor()
        self.candidates = tuple(candidates)
        self.powersgd_gain = float(powersgd_gain)
        #: Group key (group name, or the first tensor's name) -> its Decision.
        self.decisions: Dict[str, Decision] = {}
        self.sent = stateful.SentBytes()  # the groups sent dense or cast; PowerSGD counts its own
        self._costs: Dict[int, CompressionCosts] = {}
        self._membership: Any = None  # the communicator the decisions were agreed over

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "powersgd_rank": self.powersgd_rank, "half": self.half_name,
                "candidates": list(self.candidates), "powersgd_gain": self.powersgd_gain}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "AutoCompressor":
        """The compressor a ``get_config()`` dict describes."""
        return cls(int(config.get("powersgd_rank", 2)), half=config.get("half", "bf16"),
                   candidates=tuple(config.get("candidates", ("none", "half", "powersgd"))),
                   powersgd_gain=float(config.get("powersgd_gain", 0.8)))

    def __repr__(self) -> str:
        return (f"Compression.auto(powersgd_rank={self.powersgd_rank}, half={self.half_name!r}, "
                f"candidates={self.candidates!r}, powersgd_gain={self.powersgd_gain!r})")

    def choices(self) -> Dict[str, str]:
        """Group key -> what it was sent as ("none", "bf16"/"fp16" or "powersgd")."""
        return {key: d.choice for key, d in self.decisions.items()}

    def wire_bytes(self) -> int:
        """Bytes this rank sends per step (the calls built so far), by the formulas of the
        bandwidth-optimal allreduce: each group as it was sent (the benchmarks' account)."""
        return sum(self.sent.by_call.values()) + self.powersgd.wire_bytes()

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Sparse (IndexedSlices) gradients are allgathered uncompressed."""
        return tensor, None

    def costs(self, name: str, process_set: Any = None) -> CompressionCosts:
        """The agreed ``CompressionCosts``, measured at the first call on each process set
        (collective over its ranks, named ``name``: every rank of the set reaches it at
        its first call)."""
        set_id = 0 if process_set is None else int(getattr(process_set, "process_set_id", 0))
        if set_id not in self._costs:
            with tf.init_scope():  # eager, even while a tf.function is traced
                self._costs[set_id] = agreed_costs(
                    local_costs(self.half.cast_code, self.powersgd_rank), name, process_set)
        return self._costs[set_id]

    def decide(self, specs: Sequence[TensorSpec], key: str, process_set: Any = None,
               ranks: Optional[int] = None, collective: Optional[str] = None) -> Decision:
        """The (cached) decision for the group ``key`` of tensors ``specs``; the agreement
        collectives are named ``collective`` (default: ``key``)."""
        collective = collective or key
        membership = _communicator.current()
        if membership is not self._membership:
            # Elastic recovery changed the ranks: a replacement knows no decision, so
            # every rank agrees afresh (a survivor's cached one would leave it alone).
            self.decisions.clear()
            self._costs.clear()
            self._membership = membership
        signature = tuple(specs)
        known = self.decisions.get(key)
        if known is not None and known.signature == signature:
            return known
        ranks = runtime.size() if ranks is None else ranks
        candidates = [c for c in self.candidates
                      if not (c == "powersgd" and process_set is not None)]
        if ranks <= 1 or not candidates:
            decision = Decision("none", {}, signature)
        else:
            predicted = predicted_seconds(specs, fastest_allreduce_seconds,
                                          self.costs(collective, process_set),
                                          self.powersgd_rank)
            chosen = choose(predicted, candidates, self.powersgd_gain)
            decision = Decision(self.half_name if chosen == "half" else chosen, predicted,
                                signature)
            self._check_agreed(decision.choice, key, collective, process_set)
        self.decisions[key] = decision
        return decision

    @staticmethod
    def _check_agreed(choice: str, key: str, collective: str, process_set: Any) -> None:
        """One Max allreduce of (code, -code), named as the call's first collective (see
        ``agreed_costs``): equal codes on every rank, or a RuntimeError on every rank."""
        code = _CODES[choice]
        extra = {} if process_set is None else {"process_set": process_set}
        with tf.init_scope():
            both = _agreed(lambda: ops.allreduce(tf.constant([code, -code], tf.int32),
                                                 op=ops.Max, name=collective, **extra),
                           collective)
        if int(both[0]) != -int(both[1]):
            raise RuntimeError(
                f"Compression.auto: ranks chose differently for {key!r} (codes "
                f"{-int(both[1])}..{int(both[0])} of {CHOICES}); their link or compression "
                "costs differ, which agreed measurements should rule out: report this")

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None,
                  process_set: Any = None) -> List[tf.Tensor]:
        op, tensors = stateful.checked_call("auto", op, tensors, names, group_name)
        if not tensors:
            return []
        if process_set is not None and process_set_id(process_set, "Compression.auto") == \
                GLOBAL_ID:
            process_set = None
        key = group_name or names[0]
        # The name of the call's first collective without compression (stateful.agreement).
        first = f"{group_name}.0" if group_name else names[0]
        decision = self.decide([TensorSpec.of(t) for t in tensors], key, process_set,
                               size_of(process_set), first)
        scales = dict(op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                      group_name=group_name)
        if decision.choice == "powersgd":
            self.sent.by_call.pop(key, None)
            return self.powersgd.allreduce(tensors, names, **scales)
        full = sum(stateful.nbytes(t) for t in tensors)
        sent = full
        if decision.choice in ("bf16", "fp16"):
            sent -= sum(stateful.nbytes(t) // t.dtype.size * (t.dtype.size - 2)
                        for t in tensors if t.dtype.is_floating and t.dtype.size >= 4)
        ranks = size_of(process_set)
        self.sent.record(key, dense_wire_bytes(sent, ranks), dense_wire_bytes(full, ranks))
        chosen = self.half if decision.choice in ("bf16", "fp16") else Compressor()
        extra = {} if process_set is None else {"process_set": process_set}
        return chosen.allreduce(tensors, names, **scales, **extra)
