"""numpy reference models of the collectives' contracts, and every rank's inputs.

Inputs come from ``np.random.default_rng([seed, rank, salt])``, so each rank
can build every rank's input and compute the expected result alone. The
models follow README.md's API table and tfdist/ops.py's docstrings: scale
factors in double precision, integers rounded to nearest (ties to even) and
saturated, float16/bfloat16 accumulated in float32.

Comparison: bit for bit (``exact``) where the contract fixes the bits;
otherwise within ``tolerance`` (see there for the bound and why).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import ml_dtypes
import numpy as np

NUMPY_DTYPES = {"uint8": np.uint8, "int8": np.int8, "int32": np.int32, "int64": np.int64,
                "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                "float32": np.float32, "float64": np.float64, "bool": np.bool_}
INTEGERS = ("uint8", "int8", "int32", "int64")
# float32 accumulates the 16-bit floats (README: "float16 and bfloat16 are accumulated in float32").
ACCUMULATION = {"float16": np.float32, "bfloat16": np.float32}


def rng(case: Dict[str, Any], rank: int, salt: int = 0) -> np.random.Generator:
    return np.random.default_rng([case["seed"], rank, salt])


def eps(dtype: str) -> float:
    return float(ml_dtypes.finfo(NUMPY_DTYPES[dtype]).eps)


def tiny(dtype: str) -> float:
    """The smallest positive subnormal of a float dtype."""
    return float(ml_dtypes.finfo(NUMPY_DTYPES[dtype]).smallest_subnormal)


def power_of_two(x: float) -> bool:
    m, _ = np.frexp(abs(x))
    return x != 0 and m == 0.5


# --- inputs -----------------------------------------------------------------

def reduction_input(dtype: str, op: str, shape: Sequence[int], values: str, pre: float,
                    post: float, generator: np.random.Generator, exponent: int) -> np.ndarray:
    """One rank's input of a reduction, in ``dtype``; chosen so that nothing overflows."""
    shape = tuple(shape)
    if dtype == "bool":
        return generator.random(shape) < 0.5
    if dtype in INTEGERS:
        info = np.iinfo(NUMPY_DTYPES[dtype])
        if op == "Product":
            choices = [1, 2] if info.min == 0 else [-1, 1, 2, 1]
            return generator.choice(choices, size=shape).astype(NUMPY_DTYPES[dtype])
        if op in ("Min", "Max") and pre == 1.0 and post == 1.0:
            return generator.integers(info.min, info.max, size=shape, endpoint=True,
                                      dtype=NUMPY_DTYPES[dtype])
        bound = min(int(info.max) // 24, 10 ** 6)
        low = 0 if info.min == 0 else -bound
        return generator.integers(low, bound, size=shape, endpoint=True).astype(
            NUMPY_DTYPES[dtype])
    if op == "Product":
        if values == "exact":
            base = generator.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], size=shape)
        else:
            base = generator.uniform(0.5, 2.0, size=shape) * generator.choice([-1, 1], size=shape)
        return base.astype(NUMPY_DTYPES[dtype])
    if op in ("Min", "Max"):
        base = generator.standard_normal(shape) * 10.0 ** generator.uniform(-3, 3, size=shape)
        if base.size and values == "random":
            flat = base.reshape(-1)
            flat[generator.random(flat.size) < 0.1] = np.inf
            flat[generator.random(flat.size) < 0.1] = -np.inf
        return np.where(base == 0, 1.0, base).astype(NUMPY_DTYPES[dtype])
    if values == "exact":
        # Small integers times a common power of two: every partial sum is exact in every
        # float type (at most 4 * 8 * 1.5 = 48 < 2**8), so any order of addition gives the
        # same bits.
        return (generator.integers(-8, 8, size=shape, endpoint=True) * 2.0 ** exponent).astype(
            NUMPY_DTYPES[dtype])
    base = generator.standard_normal(shape) * 10.0 ** generator.uniform(-2, 2, size=shape)
    return base.astype(NUMPY_DTYPES[dtype])


def data_input(dtype: str, shape: Sequence[int], generator: np.random.Generator) -> np.ndarray:
    """Arbitrary bits of ``dtype`` (NaN, infinities and -0.0 included): moved, never computed."""
    shape = tuple(shape)
    if dtype == "bool":
        return generator.random(shape) < 0.5
    np_dtype = np.dtype(NUMPY_DTYPES[dtype])
    raw = generator.integers(0, 256, size=int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize,
                             dtype=np.uint8)
    return raw.view(np_dtype).reshape(shape)


# --- reductions -------------------------------------------------------------

def reduce(inputs: List[np.ndarray], dtype: str, op: str, pre: float, post: float) -> np.ndarray:
    """The allreduce contract on the ranks' inputs, computed in double and cast."""
    size = len(inputs)
    if dtype in INTEGERS and pre == 1.0 and post == 1.0 and op in ("Sum", "Min", "Max"):
        # Exact in int64 (double would round int64 extremes).
        stack64 = np.stack([x.astype(np.int64) for x in inputs])
        result64 = {"Sum": stack64.sum(0), "Min": stack64.min(0), "Max": stack64.max(0)}[op]
        return result64.astype(NUMPY_DTYPES[dtype])
    if dtype in INTEGERS:
        scaled = [x.astype(np.float64) * pre for x in inputs]
        scaled = [_store(s, dtype) for s in scaled]  # prescaled values live in the dtype
        stack = np.stack([s.astype(np.float64) for s in scaled])
    else:
        accumulation = ACCUMULATION.get(dtype, NUMPY_DTYPES[dtype])
        stack = np.stack([(x.astype(np.float64) * pre).astype(accumulation).astype(np.float64)
                          for x in inputs])
    if op in ("Sum", "Average"):
        result = stack.sum(0)
    elif op == "Min":
        result = stack.min(0)
    elif op == "Max":
        result = stack.max(0)
    else:
        result = stack.prod(0)
    factor = post / size if op == "Average" else post
    return _store(result * factor, dtype)


def _store(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype in INTEGERS:
        info = np.iinfo(NUMPY_DTYPES[dtype])
        with np.errstate(invalid="ignore"):
            rounded = np.clip(np.nan_to_num(np.rint(x), nan=0.0), float(info.min),
                              float(info.max))
        return rounded.astype(NUMPY_DTYPES[dtype])
    return np.asarray(x).astype(NUMPY_DTYPES[dtype])


def reduction_is_exact(dtype: str, op: str, pre: float, post: float, values: str,
                       size: int) -> bool:
    """Whether the contract fixes the bits: no rounding anywhere, in any order of addition."""
    if dtype in INTEGERS or dtype == "bool":
        return True
    factor = post / size if op == "Average" else post
    scales_exact = all(s == 1.0 or power_of_two(s) for s in (pre, factor, post))
    if op in ("Min", "Max"):
        return scales_exact
    return values == "exact" and scales_exact


def tolerance(inputs: List[np.ndarray], dtype: str, op: str, pre: float,
              post: float) -> np.ndarray:
    """Per-element bound on |got - exact| for a floating reduction.

    Summing P terms in any order errs by at most (P-1)·u·Σ|x| (u = eps/2, one
    rounding per addition, each partial sum bounded by Σ|x|); the prescale,
    the postscale (with Average's 1/P) and the final cast add one rounding
    each, u relative. The bound used is twice that, (P+3)·eps·Σ|x·pre|·|post|,
    plus (P+3) subnormals for values below the normal range. eps is the
    dtype's own: 16-bit floats are added in float32 (eps 2^-23), so their
    error is the final rounding, well inside their eps. Products: the same
    count of roundings relative to |Π x|; Min/Max round only the scales.
    """
    size = len(inputs)
    stack = np.stack([np.abs(x.astype(np.float64) * pre) for x in inputs])
    factor = abs(post / size if op == "Average" else post)
    if op == "Product":
        magnitude = stack.prod(0) * factor
    elif op in ("Min", "Max"):
        magnitude = stack.max(0) * factor
    else:
        magnitude = stack.sum(0) * factor
    return (size + 3) * (eps(dtype) * magnitude + tiny(dtype) * max(1.0, factor))


def bits(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype == np.bool_:
        return array.view(np.uint8)
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.kind in "fV" or \
        array.dtype == ml_dtypes.bfloat16 else array


def compare(got: np.ndarray, expected: np.ndarray, what: str,
            tol: Optional[np.ndarray] = None) -> Optional[str]:
    """None when ``got`` meets ``expected`` (bit for bit, or within ``tol``), else why not."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return (f"{what}: got {got.dtype}{list(got.shape)}, expected "
                f"{expected.dtype}{list(expected.shape)}")
    if tol is None:
        bad = bits(got) != bits(expected)
    else:
        g = got.astype(np.float64)
        e = expected.astype(np.float64)
        with np.errstate(invalid="ignore"):
            same_special = (np.isnan(g) & np.isnan(e)) | ((g == e) & ~np.isfinite(e))
            bad = ~same_special & ~(np.abs(g - e) <= np.broadcast_to(tol, e.shape))
    if not np.any(bad):
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    more = f" within {np.broadcast_to(tol, expected.shape)[where]:.3g}" if tol is not None else \
        " bit for bit"
    return (f"{what}: {int(np.sum(bad))} of {bad.size} elements differ; first at {where}: "
            f"got {got[where]!r}, expected {expected[where]!r}{more}")


def reducescatter_rows(rows: int, size: int) -> List[int]:
    """Rows each rank gets: as even as possible, the first rows % size ranks one more."""
    return [rows // size + (1 if r < rows % size else 0) for r in range(size)]
