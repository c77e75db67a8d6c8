"""Runs one generated compressor case for several steps beside a numpy model of it.

The model keeps, per rank and tensor, what docs/compression.md says the
compressor keeps: top-k's residual r and velocity u, PowerSGD's residual E
and warm-start Q, and the call count of ``start_step``. Each step every rank
computes every rank's model step (it can build every rank's input), compares
its own output with the model's, and at the end compares
``tfdist.runtime.rank_state()`` with the model's state and checks that
``restore_rank_state`` gives the same state back. A case with a ``restart``
takes the state out after ``restart_after`` steps, resets it, and puts it
back, through ``restore_rank_state`` or a checkpoint (``tfdist.checkpoint``,
rank 0 writing every rank's state to one file, as a restarted job restores
it); the steps after it must still match the model, which never restarts.

Bit for bit where the contract fixes the bits (top-k's sparse path: the
scatter-add in rank order is reproduced in float32; 16-bit casts of sums
that are exact); otherwise within the tolerances stated at each check.
"""
from __future__ import annotations

import math
import os
import shutil
from typing import Any, Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np
import tensorflow as tf

import tfdist
import tfdist.checkpoint
import reference as ref

F32 = np.float32

#: Where restarts through a checkpoint write, one folder per case: the same path on every
#: rank (worker.py sets it beside its results file).
checkpoint_root: Optional[str] = None


class CaseFailure(AssertionError):
    """What differs, raised to end the case."""


def _check(error: Optional[str]) -> None:
    if error:
        raise CaseFailure(error)


# --- inputs -----------------------------------------------------------------

def step_input(case: Dict[str, Any], step: int, index: int, rank: int, size: int) -> np.ndarray:
    dtype, shape, kind = case["dtypes"][index], tuple(case["shapes"][index]), case["inputs"][step]
    gen = ref.rng(case, rank, 1000 + 10 * step + index)
    shared = ref.rng(case, 0, 5000 + 10 * step + index)  # the same on every rank
    np_dtype = ref.NUMPY_DTYPES[dtype]
    if dtype in ref.INTEGERS:
        values = np.zeros(shape) if kind == "zero" else gen.integers(-100, 100, size=shape)
        return values.astype(np_dtype)
    if kind == "zero":
        values = np.zeros(shape)
    elif kind == "constant":
        values = np.full(shape, 0.75 * (rank + 1))
    elif kind == "exact":
        values = gen.integers(-8, 8, size=shape, endpoint=True) * 0.25
    elif kind == "rank_deficient" and len(shape) >= 2:
        n, m = int(np.prod(shape[:-1])), shape[-1]
        values = (np.outer(shared.standard_normal(n), shared.standard_normal(m))
                  * (rank + 1)).reshape(shape)
    elif kind == "tiny":
        scale = 1e-6 if dtype == "float16" else 1e-30
        values = gen.standard_normal(shape) * scale
    elif kind == "huge":
        if dtype == "float16" or case["compressor"] == "fp16":
            bound = 6e4 / (max(1.0, case["pre"]) * max(1.0, case["post"])
                           * (size if case["op"] == "Sum" else 1))
            values = gen.uniform(-bound, bound, size=shape)
        else:
            values = gen.uniform(1.0, 2.0, size=shape) * 1e30 * gen.choice([-1, 1], size=shape)
    elif kind == "nonfinite":
        values = gen.standard_normal(shape)
        flat = values.reshape(-1)
        if flat.size and rank == 0:
            flat[gen.integers(0, flat.size)] = np.nan
            flat[gen.integers(0, flat.size)] = np.inf
    else:
        values = gen.standard_normal(shape) * 10.0 ** gen.uniform(-1, 1)
    return np.asarray(values).astype(np_dtype)


def _names(case: Dict[str, Any]) -> Tuple[str, List[str]]:
    base = f"dz.{case['id']}"
    if case["grouped"]:
        return base, [f"{base}.{i}" for i in range(len(case["dtypes"]))]
    return base, [base]


def _factor(case: Dict[str, Any], size: int) -> float:
    return case["pre"] * case["post"] / (size if case["op"] == "Average" else 1)


def _cast_out(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(ref.NUMPY_DTYPES[dtype])


def _integer_reduce(case, inputs: List[np.ndarray], dtype: str) -> np.ndarray:
    return ref.reduce(inputs, dtype, case["op"], case["pre"],
                      case["post"])


# --- fp16 / bf16 --------------------------------------------------------------

def _sums_exactly(arrays: List[np.ndarray]) -> bool:
    """Whether every order of summing ``arrays`` in float32 gives the same bits: all finite
    multiples of 1/4 (the "exact" and "constant" inputs' grid) whose sum of magnitudes
    stays under 2^22, so that every partial sum is representable."""
    with np.errstate(invalid="ignore", over="ignore"):
        quarters = [a.astype(np.float64) * 4 for a in arrays]
        if not all(np.all(np.isfinite(q)) and np.all(q == np.round(q)) for q in quarters):
            return False
        return bool(np.all(np.sum([np.abs(q) for q in quarters], axis=0) < 2.0 ** 24))


class SixteenBitModel:
    """Compression.fp16/.bf16: each rank's value, scaled while packing, rounded once to 16
    bits; the 16-bit values summed (in float32, rounded to 16 bits per addition); widened
    and, for a postscale above 1, scaled at the unpack (docs/compression.md)."""

    def __init__(self, case: Dict[str, Any], size: int) -> None:
        self.case, self.size = case, size
        self.wire = np.float16 if case["compressor"] == "fp16" else ml_dtypes.bfloat16
        self.wire_name = "float16" if case["compressor"] == "fp16" else "bfloat16"

    def step(self, inputs: List[List[np.ndarray]], rank: int) -> List[Tuple[np.ndarray, Any]]:
        case, size = self.case, self.size
        effective = case["post"] / size if case["op"] == "Average" else case["post"]
        pack, unpack = ((case["pre"] * effective, 1.0) if abs(effective) <= 1.0
                        else (case["pre"], effective))
        outputs = []
        for index, dtype in enumerate(case["dtypes"]):
            per_rank = [inputs[r][index] for r in range(size)]
            if dtype in ref.INTEGERS:
                outputs.append((_integer_reduce(case, per_rank, dtype), None))
                continue
            wire = [(x.astype(np.float64) * pack).astype(self.wire).astype(np.float64)
                    for x in per_rank]
            with np.errstate(invalid="ignore", over="ignore"):
                total = np.sum(wire, axis=0).astype(self.wire).astype(np.float64) * unpack
            expected = _cast_out(total, dtype)
            exact = (all(ref.power_of_two(s) or s == 1.0 for s in (pack, unpack))
                     and case["inputs"][self.current] in ("exact", "zero", "constant"))
            tol = None
            if not exact:
                # Each input and each of the P-1 additions rounds once to 16 bits (u = eps/2
                # relative to at most Σ|x·pack|), the widening and unpack scale once more:
                # (P+3)·eps16·Σ|x·pack|·|unpack|, plus as many 16-bit subnormals, and the
                # output dtype's own rounding.
                magnitude = np.sum([np.abs(x.astype(np.float64) * pack) for x in per_rank],
                                   axis=0) * abs(unpack)
                tol = ((size + 3) * (ref.eps(self.wire_name) * magnitude
                                     + ref.tiny(self.wire_name) * max(1.0, abs(unpack)))
                       + ref.eps(dtype) * np.abs(total))
            outputs.append((expected, tol))
        return outputs

    def state(self, rank: int) -> Dict[str, np.ndarray]:
        return {}


# --- top-k ---------------------------------------------------------------------

def topk_count(ratio: float, n: int) -> int:
    """docs/compression.md: k = ceil(ratio·n), at least 1 and at most n."""
    if n == 0:
        return 0
    exact = ratio * n
    return max(1, min(n, math.ceil(exact - 1e-9 * exact)))


def select(a: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k entries of largest magnitude: larger |a| first, then lower index;
    NaN above every number."""
    keys = np.abs(a).view(np.uint32).astype(np.int64)
    keys[np.isnan(a)] = 0x7F800001
    order = np.lexsort((np.arange(a.size), -keys))
    return np.sort(order[:k])


class TopKModel:
    def __init__(self, case: Dict[str, Any], size: int) -> None:
        self.case, self.size = case, size
        p = case["params"]
        self.ratio, self.ef, self.m, self.start = (p["ratio"], p["error_feedback"],
                                                   p["momentum"], p["start_step"])
        self.key, self.names = _names(case)
        n = [int(np.prod(s, dtype=np.int64)) for s in case["shapes"]]
        self.sizes = n
        self.r = [[np.zeros(k, F32) for k in n] for _ in range(size)]
        self.u = [[np.zeros(k, F32) for k in n] for _ in range(size)]
        self.touched_u = False
        self.calls = 0
        cost = tfdist.link_cost()
        self.sparse = size > 1 and self._gather_cheaper(cost)

    def _gather_cheaper(self, cost: Dict[str, float]) -> bool:
        """docs/compression.md "Sparse or dense", from the measured link cost."""
        size, latency = self.size, cost["latency_s"]
        per_byte, reduce_per_byte = cost["seconds_per_byte"], cost["reduce_seconds_per_byte"]
        pairs = sum(topk_count(self.ratio, n) for n in self.sizes)
        elements = sum(self.sizes)
        gather = (size - 1) * latency + (size - 1) * 8 * pairs * per_byte \
            + size * pairs * 4 * reduce_per_byte
        dense = 2 * math.log2(size) * latency + 2 * (size - 1) / size * 4 * elements * per_byte \
            + (size - 1) / size * 4 * elements * reduce_per_byte
        return gather < dense

    def step(self, inputs: List[List[np.ndarray]], rank: int) -> List[Tuple[np.ndarray, Any]]:
        case, size = self.case, self.size
        sparse = self.sparse and self.calls >= self.start
        self.calls += 1
        factor = F32(_factor(case, size))
        sent: List[List[np.ndarray]] = []  # per rank, per tensor: dense a (zeros where not sent)
        pairs: List[List[Tuple[np.ndarray, np.ndarray]]] = []
        for r in range(size):
            sent.append([])
            pairs.append([])
            for i in range(len(self.sizes)):
                g = inputs[r][i].astype(F32).reshape(-1)
                with np.errstate(invalid="ignore", over="ignore"):
                    if self.m:
                        self.u[r][i] = F32(self.m) * self.u[r][i] + g
                        self.touched_u = True
                        a = self.r[r][i] + self.u[r][i]
                    elif self.ef:
                        a = g + self.r[r][i]
                    else:
                        a = g
                if sparse:
                    index = select(a, topk_count(self.ratio, a.size))
                    pairs[r].append((index, a[index]))
                    if self.ef:
                        rest = a.copy()
                        rest[index] = 0
                        self.r[r][i] = rest
                    if self.m:
                        self.u[r][i][index] = 0
                else:
                    sent[r].append(a)
                    self.r[r][i] = np.zeros_like(a)
        outputs = []
        for i, dtype in enumerate(case["dtypes"]):
            if sparse:
                total = np.zeros(self.sizes[i], F32)
                with np.errstate(invalid="ignore", over="ignore"):
                    for r in range(size):  # scatter-add in rank order, in float32
                        index, value = pairs[r][i]
                        total[index] = total[index] + value
                tol = None
                magnitude = None
            else:
                with np.errstate(invalid="ignore", over="ignore"):
                    total = np.sum([sent[r][i].astype(np.float64) for r in range(size)],
                                   axis=0).astype(F32)
                magnitude = np.sum([np.abs(sent[r][i].astype(np.float64)) for r in range(size)],
                                   axis=0)
            with np.errstate(invalid="ignore", over="ignore"):
                scaled = total * factor if factor != F32(1.0) else total
            expected = _cast_out(scaled.reshape(case["shapes"][i]), dtype)
            tol = None
            # Judged on what was sent, not on this step's kind of input: momentum and a
            # residual carry earlier steps' values into it (0.9·u is inexact).
            exact_values = not sparse and _sums_exactly([sent[r][i] for r in range(size)])
            if not sparse and not (exact_values and (ref.power_of_two(float(factor))
                                                     or factor == 1)):
                # A dense float32 sum in an order the reference cannot know: (P+1)·eps32 of
                # Σ|a|, times the factor (one more rounding), then the output's rounding.
                tol = ((size + 2) * ref.eps("float32") * magnitude * abs(float(factor))
                       + ref.eps(dtype) * np.abs(scaled.astype(np.float64))
                       + (size + 2) * ref.tiny("float32")).reshape(case["shapes"][i])
            if dtype == "float64" and tol is None:
                # Summed in float32 (docs/compression.md, "float64"): its rounding, once.
                tol = (2 * ref.eps("float32") * np.abs(scaled.astype(np.float64))
                       ).reshape(case["shapes"][i])
            outputs.append((expected, tol))
        return outputs

    def state(self, rank: int) -> Dict[str, np.ndarray]:
        out = {}
        for i, name in enumerate(self.names):
            shape = tuple(self.case["shapes"][i])
            if self.ef:
                out[f"topk.residual/{name}"] = self.r[rank][i].reshape(shape)
            if self.m and self.touched_u:
                out[f"topk.velocity/{name}"] = self.u[rank][i].reshape(shape)
        return out


# --- PowerSGD ------------------------------------------------------------------

def orthogonalize(p: np.ndarray) -> np.ndarray:
    """Modified Gram-Schmidt in double, twice; a column whose norm falls below 1e-6 of its
    original becomes zero (docs/compression.md)."""
    q = p.astype(np.float64).copy()
    original = np.linalg.norm(q, axis=0)
    for _ in range(2):
        for j in range(q.shape[1]):
            for i in range(j):
                q[:, j] -= np.dot(q[:, i], q[:, j]) * q[:, i]
            norm = np.linalg.norm(q[:, j])
            if not norm >= 1e-6 * original[j] or norm == 0:
                q[:, j] = 0.0
            else:
                q[:, j] /= norm
    return q.astype(F32)


_MASK = (1 << 64) - 1


def _fnv1a(text: str) -> int:
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & _MASK
    return value


def seeded_normal(seed: int, count: int) -> np.ndarray:
    """docs/compression.md's seeded standard normals: SplitMix64 from ``seed``, one
    Box-Muller value per pair of 53-bit uniforms in (0, 1), rounded to float32."""
    state, out = seed, np.empty(count, F32)

    def uniform() -> float:
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return (((z ^ (z >> 31)) >> 11) + 0.5) * (1.0 / 9007199254740992.0)

    for i in range(count):
        u1, u2 = uniform(), uniform()
        out[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)
    return out


def initial_q(name: str, m: int, rank: int) -> np.ndarray:
    """The name's initial Q (m x rank): seeded_normal(FNV-1a of the name), row-major."""
    return seeded_normal(_fnv1a(name), m * rank).reshape(m, rank)


def _independent(column: np.ndarray, basis: List[np.ndarray]) -> bool:
    """Whether ``column`` keeps more than 1e-6 of its norm once projected off ``basis``
    (twice); if so its normalised remainder joins the basis."""
    column = column.astype(np.float64)
    original = float(np.sqrt(np.dot(column, column)))
    if not (math.isfinite(original) and original > 0.0):
        return False
    for _ in range(2):
        for b in basis:
            column = column - np.dot(column, b) * b
    norm = float(np.sqrt(np.dot(column, column)))
    if not (math.isfinite(norm) and norm > 1e-6 * original):
        return False
    basis.append(column / norm)
    return True


def refill_q(name: str, q: np.ndarray) -> np.ndarray:
    """docs/compression.md "A zero gradient": before each compressed step every column of
    the warm-start Q that is zero, not finite or dependent on the columns before it is
    replaced by that column of the name's initial Q (then, should that be dependent too,
    by columns seeded by "<name>#refill<c>.<attempt>"); the others stay bit for bit."""
    m, rank = q.shape
    q = q.copy()
    basis: List[np.ndarray] = []
    for c in range(rank):
        if _independent(q[:, c], basis):
            continue
        for attempt in range(8):
            candidate = (initial_q(name, m, rank)[:, c] if attempt == 0 else
                         seeded_normal(_fnv1a(f"{name}#refill{c}.{attempt}"), m))
            if _independent(candidate, basis):
                break
        q[:, c] = candidate
    return q


def matrix_view(shape) -> Tuple[int, int]:
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


class PowerSGDModel:
    def __init__(self, case: Dict[str, Any], size: int) -> None:
        self.case, self.size = case, size
        p = case["params"]
        self.rank, self.ef, self.start = p["rank"], p["error_feedback"], p["start_step"]
        self.key, self.names = _names(case)
        self.chosen = [i for i, (d, s) in enumerate(zip(case["dtypes"], case["shapes"]))
                       if d not in ref.INTEGERS and self.compresses(s)]
        self.e = {(r, i): np.zeros(matrix_view(case["shapes"][i]), F32)
                  for r in range(size) for i in self.chosen}
        # Odd seeds start from a warm-start Q set through restore_rank_state, even
        # ones from the name's initial Q, which the library makes on the first step.
        self.restored = case["seed"] % 2 == 1
        gen = np.random.default_rng([case["seed"], 42])
        self.q = {i: (gen.standard_normal((matrix_view(case["shapes"][i])[1], self.rank))
                      .astype(F32) if self.restored else
                      initial_q(self.names[i], matrix_view(case["shapes"][i])[1], self.rank))
                  for i in self.chosen}
        self.calls = 0

    def compresses(self, shape) -> bool:
        if len(shape) < 2:
            return False
        n, m = matrix_view(shape)
        return n > 0 and m > 0 and (n + m) * self.rank * 2 < n * m

    def initial_state(self) -> Dict[str, np.ndarray]:
        """The warm-start Q to set through restore_rank_state ({} for the initial Q)."""
        if not self.restored:
            return {}
        return {f"powersgd.q/{self.names[i]}": self.q[i] for i in self.chosen}

    def step(self, inputs: List[List[np.ndarray]], rank: int) -> List[Tuple[np.ndarray, Any]]:
        case, size = self.case, self.size
        compressed = self.calls >= self.start
        self.calls += 1
        factor = _factor(case, size)
        outputs: List[Tuple[np.ndarray, Any]] = []
        for i, dtype in enumerate(case["dtypes"]):
            per_rank = [inputs[r][i] for r in range(size)]
            if not (compressed and i in self.chosen):
                if dtype in ref.INTEGERS:
                    outputs.append((_integer_reduce(case, per_rank, dtype), None))
                else:
                    outputs.append((ref.reduce(per_rank, dtype, case["op"], case["pre"],
                                               case["post"]),
                                    ref.tolerance(per_rank, dtype, case["op"], case["pre"],
                                                  case["post"])))
                continue
            n, m = matrix_view(case["shapes"][i])
            self.q[i] = refill_q(self.names[i], self.q[i])
            with np.errstate(all="ignore"):
                ms = [inputs[r][i].astype(F32).reshape(n, m) + self.e[(r, i)]
                      for r in range(size)]
                p_sum = np.sum([x.astype(np.float64) @ self.q[i].astype(np.float64)
                                for x in ms], axis=0) * factor
                p_hat = orthogonalize(p_sum.astype(F32)).astype(np.float64)
                q_local = [x.astype(np.float64).T @ p_hat for x in ms]
                q_sum = np.sum(q_local, axis=0) * factor
                out = p_hat @ q_sum.T
                for r in range(size):
                    self.e[(r, i)] = ((ms[r].astype(np.float64) - p_hat @ q_local[r].T)
                                      .astype(F32) if self.ef else np.zeros((n, m), F32))
                # The allreduced Q is stored as it is; the next step refills it.
                self.q[i] = q_sum.astype(F32)
            # float32 products of length <= 64 err by <= 64·eps32 ≈ 8e-6 of the norms; the
            # orthogonalisation may amplify that by the conditioning of P: 1e-4 of
            # |factor|·Σ‖M_r‖ (Frobenius), plus the output dtype's rounding.
            scale = abs(factor) * sum(float(np.linalg.norm(x.astype(np.float64))) for x in ms)
            self.state_scale = max(getattr(self, "state_scale", 0.0),
                                   max(float(np.linalg.norm(x.astype(np.float64))) for x in ms)
                                   * max(1.0, abs(factor) * size))
            tol = 1e-4 * scale + ref.eps(dtype) * np.abs(out) + 1e-30
            outputs.append((_cast_out(out.reshape(case["shapes"][i]), dtype),
                            tol.reshape(case["shapes"][i])))
        return outputs

    def state(self, rank: int) -> Dict[str, np.ndarray]:
        out = {}
        for i in self.chosen:
            out[f"powersgd.q/{self.names[i]}"] = self.q[i]
            if self.ef:
                out[f"powersgd.residual/{self.names[i]}"] = self.e[(rank, i)]
        return out


MODELS = {"fp16": SixteenBitModel, "bf16": SixteenBitModel, "topk": TopKModel,
          "powersgd": PowerSGDModel}


def compressor(case: Dict[str, Any]) -> Any:
    kind, params = case["compressor"], case["params"]
    if kind == "fp16":
        return tfdist.Compression.fp16
    if kind == "bf16":
        return tfdist.Compression.bf16
    if kind == "topk":
        return tfdist.Compression.topk(**params)
    return tfdist.Compression.powersgd(**params)


def _state_close(got: np.ndarray, expected: np.ndarray, what: str, exact: bool,
                 scale: float) -> Optional[str]:
    """State within 1e-4 of ``scale`` (the largest ‖M‖ the model saw, for PowerSGD: its
    residual and Q inherit the products' error, see PowerSGDModel.step)."""
    if got.shape != expected.shape:
        return f"{what}: shape {got.shape}, expected {expected.shape}"
    got = got.astype(np.float64)
    expected = expected.astype(np.float64)
    if exact:
        return ref.compare(got, expected, what)
    scale = max(scale, np.max(np.abs(expected[np.isfinite(expected)]), initial=0.0))
    return ref.compare(got, expected, what,
                       1e-4 * scale + 2 * ref.eps("float32") * np.abs(expected))


def run(case: Dict[str, Any], rank: int, size: int) -> Optional[str]:
    tfdist.runtime.restore_rank_state({})
    model = MODELS[case["compressor"]](case, size)
    if isinstance(model, PowerSGDModel):
        tfdist.runtime.restore_rank_state(model.initial_state())
    key, names = _names(case)
    comp = compressor(case)
    op = {"Sum": tfdist.Sum, "Average": tfdist.Average}[case["op"]]

    def call(*tensors):
        if case["grouped"]:
            return tfdist.grouped_allreduce(list(tensors), op=op, name=key,
                                            prescale_factor=case["pre"],
                                            postscale_factor=case["post"], compression=comp)
        return [tfdist.allreduce(tensors[0], op=op, name=key, prescale_factor=case["pre"],
                                 postscale_factor=case["post"], compression=comp)]

    if case["mode"] == "function":
        call = tf.function(call)
    for step in range(len(case["inputs"])):
        if case.get("restart") and step == case["restart_after"]:
            _check(restart(case, step))
        model.current = step
        inputs = [[step_input(case, step, i, r, size) for i in range(len(case["dtypes"]))]
                  for r in range(size)]
        got = call(*[tf.constant(x) for x in inputs[rank]])
        for i, (output, (expected, tol)) in enumerate(zip(got, model.step(inputs, rank))):
            _check(ref.compare(output.numpy(), expected,
                               f"step {step} ({case['inputs'][step]}) tensor {i}", tol))
    if case.get("restart") and case["restart_after"] == len(case["inputs"]):
        _check(restart(case, len(case["inputs"])))
    state = tfdist.runtime.rank_state()
    expected_state = model.state(rank)
    exact = isinstance(model, TopKModel) and "float64" not in case["dtypes"]
    for name, value in expected_state.items():
        if name not in state:
            if np.any(value):
                return f"rank_state() lacks {name!r} (has {sorted(state)})"
            continue
        _check(_state_close(state[name], value, f"rank_state()[{name!r}]", exact,
                            getattr(model, "state_scale", 0.0)))
    tfdist.runtime.restore_rank_state(state)
    again = tfdist.runtime.rank_state()
    if sorted(again) != sorted(state):
        return f"restore_rank_state(rank_state()) gave {sorted(again)}, saved {sorted(state)}"
    for name in state:
        _check(ref.compare(again[name], state[name], f"restored {name!r}"))
    return None


def restart(case: Dict[str, Any], step: int) -> Optional[str]:
    """The rank's state leaves and comes back as in a restarted job: saved (through
    ``rank_state()``, or in a checkpoint of ``step``), reset, then restored. Every entry
    must come back bit for bit (residuals, velocities, Q, the 0-d step counts)."""
    saved = tfdist.runtime.rank_state()
    if case["restart"] == "checkpoint":
        if checkpoint_root is None:
            return "a restart through a checkpoint, but no checkpoint_root is set"
        directory = os.path.join(checkpoint_root, case["id"])
        if tfdist.rank() == 0:  # the only rank that touches the files; none left by a rerun
            shutil.rmtree(directory, ignore_errors=True)
        tfdist.checkpoint.save(directory, step, keep=1, blocking=True)
        tfdist.runtime.restore_rank_state({})
        restored = tfdist.checkpoint.restore(directory)
        if restored is None or restored.step != step:
            return f"restore after the save of step {step} found {restored!r}"
    else:
        tfdist.runtime.restore_rank_state({})
        tfdist.runtime.restore_rank_state(saved)
    again = tfdist.runtime.rank_state()
    if sorted(again) != sorted(saved):
        return (f"after a restart through {case['restart']} at step {step} the state holds "
                f"{sorted(again)}, saved {sorted(saved)}")
    for name in saved:
        failure = ref.compare(again[name], saved[name],
                              f"{name!r} after a restart through {case['restart']}")
        if failure:
            return failure
    return None
