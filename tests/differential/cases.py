"""Generated cases of the differential layer: plain dicts, the same on every rank.

Hypothesis draws the cases (``derandomize=True``, no database, generation
phase only: nothing is shrunk, so the list depends only on this file and the
Hypothesis version, never on what a run found). Each case carries a
``seed`` from which every rank's inputs are made with numpy
(reference.py, compressors.py), so any rank can rebuild every other rank's
input and the numpy reference needs no communication.

This module imports neither TensorFlow nor tfdist.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

INTEGER_DTYPES = ("uint8", "int8", "int32", "int64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
DTYPES = INTEGER_DTYPES + FLOAT_DTYPES
REDUCE_OPS = ("Sum", "Average", "Min", "Max", "Product")
# None is the default (TFDIST_ALLREDUCE_ALGORITHM, else auto); the worker
# checks that this list is everything tfdist accepts.
ALGORITHMS = (None, "auto", "tree", "butterfly", "ring", "rabenseifner", "mpi", "hierarchical",
              "shm", "hierarchical_shm")

Case = Dict[str, Any]


def _collect(strategy: st.SearchStrategy, count: int) -> List[Case]:
    drawn: List[Case] = []
    if count <= 0:
        return drawn

    @settings(derandomize=True, database=None, max_examples=count, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case: Case) -> None:
        drawn.append(case)

    collect()
    return drawn


# --- shapes -----------------------------------------------------------------

_small_dim = st.integers(0, 6)


@st.composite
def shapes(draw: Callable, min_dims: int = 0, max_elements: int = 160) -> tuple:
    """0-d, empty, odd, tiny and up to 10-dimensional shapes of at most max_elements."""
    kind = draw(st.sampled_from(["plain", "plain", "plain", "many_dims", "empty"]))
    if kind == "many_dims":
        ndim = draw(st.integers(9, 10))
        dims = [draw(st.integers(1, 2)) for _ in range(ndim)]
    elif kind == "empty":
        ndim = draw(st.integers(max(1, min_dims), 3))
        dims = [draw(_small_dim) for _ in range(ndim)]
        dims[draw(st.integers(0, ndim - 1))] = 0
    else:
        ndim = draw(st.integers(min_dims, 3))
        dims = [draw(st.integers(1, 9)) for _ in range(ndim)]
    total = 1
    for i, d in enumerate(dims):
        if total * max(d, 1) > max_elements:
            dims[i] = 1
        total *= max(dims[i], 1)
    return tuple(dims)


_seed = st.integers(0, 2 ** 31 - 1)
_name_style = st.sampled_from(["named", "named", "unnamed"])
_mode = st.sampled_from(["eager"] * 11 + ["function"])
_values = st.sampled_from(["exact", "exact", "random"])


def _scales(op: str, dtype: str) -> st.SearchStrategy:
    """(prescale, postscale) pairs; integers get factors whose products stay exact."""
    if dtype in INTEGER_DTYPES:
        signed = dtype != "uint8"
        pre = [1.0, 2.0] + ([-1.0] if signed and op not in ("Product",) else [])
        post = [1.0, 0.5, 3.0, 0.25] + ([-1.0] if signed else [])
        if op == "Product":
            pre = [1.0]
    else:
        pre = [1.0, 0.5, 2.0, -1.5, 0.1]
        post = [1.0, 0.25, 3.0, -1.0, 1e-3]
    return st.tuples(st.sampled_from([1.0] * 3 + pre), st.sampled_from([1.0] * 3 + post))


@st.composite
def allreduce_case(draw: Callable) -> Case:
    dtype = draw(st.sampled_from(DTYPES))
    op = draw(st.sampled_from(REDUCE_OPS))
    pre, post = draw(_scales(op, dtype))
    return dict(kind="allreduce", dtype=dtype, op=op, shape=draw(shapes()),
                algorithm=draw(st.sampled_from(ALGORITHMS)), pre=pre, post=post,
                values=draw(_values), naming=draw(_name_style), mode=draw(_mode),
                seed=draw(_seed))


@st.composite
def grouped_case(draw: Callable) -> Case:
    op = draw(st.sampled_from(REDUCE_OPS))
    count = draw(st.integers(1, 4))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in range(count)]
    # One scale pair for the group: take the integers' (exact) choices if any member is one.
    integer = next((d for d in dtypes if d in INTEGER_DTYPES), dtypes[0])
    pre, post = draw(_scales(op, integer))
    return dict(kind="grouped_allreduce", dtypes=dtypes, op=op,
                shapes=[draw(shapes(max_elements=60)) for _ in range(count)],
                algorithm=draw(st.sampled_from(ALGORITHMS)), pre=pre, post=post,
                values=draw(_values), naming=draw(_name_style), mode=draw(_mode),
                seed=draw(_seed))


@st.composite
def allgather_case(draw: Callable) -> Case:
    shape = draw(shapes(min_dims=1, max_elements=60))
    return dict(kind="allgather", dtype=draw(st.sampled_from(DTYPES + ("bool",))),
                row_shape=shape[1:], rows=draw(st.lists(st.integers(0, 5), min_size=4,
                                                        max_size=4)),
                naming=draw(_name_style), mode=draw(_mode), seed=draw(_seed))


@st.composite
def broadcast_case(draw: Callable) -> Case:
    return dict(kind="broadcast", dtype=draw(st.sampled_from(DTYPES + ("bool",))),
                shape=draw(shapes()), root=draw(st.integers(0, 3)), naming=draw(_name_style),
                mode=draw(_mode), seed=draw(_seed))


@st.composite
def alltoall_case(draw: Callable) -> Case:
    shape = draw(shapes(min_dims=1, max_elements=40))
    even = draw(st.sampled_from([False, False, True]))
    return dict(kind="alltoall", dtype=draw(st.sampled_from(DTYPES + ("bool",))),
                row_shape=shape[1:], even=even,
                # splits[r][j]: rows rank r sends to rank j (ranks beyond P ignored).
                splits=draw(st.lists(st.lists(st.integers(0, 3), min_size=4, max_size=4),
                                     min_size=4, max_size=4)),
                naming=draw(_name_style), mode=draw(_mode), seed=draw(_seed))


@st.composite
def reducescatter_case(draw: Callable) -> Case:
    dtype = draw(st.sampled_from(DTYPES))
    op = draw(st.sampled_from(REDUCE_OPS))
    pre, post = draw(_scales(op, dtype))
    shape = draw(shapes(min_dims=1, max_elements=80))
    return dict(kind="reducescatter", dtype=dtype, op=op, shape=shape, pre=pre, post=post,
                values=draw(_values), naming=draw(_name_style), mode=draw(_mode),
                seed=draw(_seed))


@st.composite
def ordering_case(draw: Callable) -> Case:
    """Several named ops, submitted in a rank-dependent order (a tf.function or threads)."""
    count = draw(st.integers(2, 6))
    members = [dict(kind=draw(st.sampled_from(["allreduce", "allgather", "broadcast"])),
                    dtype=draw(st.sampled_from(["int32", "float32", "int64", "float64"])),
                    shape=draw(shapes(min_dims=1, max_elements=30)), root=draw(st.integers(0, 3)))
               for _ in range(count)]
    return dict(kind="ordering", members=members, mode=draw(st.sampled_from(["function",
                                                                             "threads"])),
                seed=draw(_seed))


def collective_cases(count: int) -> List[Case]:
    """``count`` cases over every collective, in a fixed mix."""
    mix = [(allreduce_case(), 0.36), (grouped_case(), 0.12), (allgather_case(), 0.12),
           (broadcast_case(), 0.12), (alltoall_case(), 0.1), (reducescatter_case(), 0.12),
           (ordering_case(), 0.06)]
    cases: List[Case] = []
    for strategy, share in mix:
        cases += _collect(strategy, round(count * share))
    for index, case in enumerate(cases):
        case["id"] = f"c{index}"
    return cases


# --- compressors ------------------------------------------------------------

_INPUT_KINDS = ("random", "random", "random", "exact", "zero", "constant", "rank_deficient",
                "tiny", "huge", "nonfinite")


@st.composite
def compressor_case(draw: Callable) -> Case:
    kind = draw(st.sampled_from(["fp16", "bf16", "topk", "topk", "powersgd", "powersgd"]))
    params: Dict[str, Any] = {}
    if kind == "topk":
        ef = draw(st.booleans())
        params = dict(ratio=draw(st.sampled_from([0.01, 0.1, 0.25, 0.5, 1.0])),
                      error_feedback=ef,
                      momentum=draw(st.sampled_from([0.0, 0.5, 0.9])) if ef else 0.0,
                      start_step=draw(st.sampled_from([0, 0, 1, 2])))
    elif kind == "powersgd":
        params = dict(rank=draw(st.integers(1, 3)), error_feedback=draw(st.booleans()),
                      start_step=draw(st.sampled_from([0, 0, 1])))
    count = draw(st.integers(1, 3))
    if kind in ("fp16", "bf16"):
        dtype_choice = st.sampled_from(["float32", "float32", "float16", "bfloat16", "float64",
                                        "int32"])
    elif kind == "topk":
        dtype_choice = st.sampled_from(["float32", "float32", "float16", "bfloat16", "float64"])
    else:
        dtype_choice = st.sampled_from(["float32", "float32", "float32", "float64", "int32"])
    if kind == "powersgd":
        shape_choice = st.one_of(
            st.tuples(st.integers(4, 12), st.integers(4, 12)),
            st.tuples(st.integers(1, 3), st.integers(2, 4), st.integers(4, 9)),
            shapes(max_elements=60))
    else:
        shape_choice = shapes(max_elements=120)
    steps = draw(st.integers(1, 4))
    # A restart after `restart_after` steps: the state goes out and comes back through
    # rank_state()/restore_rank_state() or a checkpoint, then the steps go on.
    restart = draw(st.sampled_from([None, "rank_state", "checkpoint"]))
    return dict(kind="compress", compressor=kind, params=params,
                restart=restart, restart_after=draw(st.integers(1, steps)),
                op=draw(st.sampled_from(["Sum", "Average", "Average"])),
                pre=draw(st.sampled_from([1.0, 1.0, 0.5, 2.0])),
                post=draw(st.sampled_from([1.0, 1.0, 0.25, 4.0])),
                dtypes=[draw(dtype_choice) for _ in range(count)],
                shapes=[draw(shape_choice) for _ in range(count)],
                inputs=[draw(st.sampled_from(_INPUT_KINDS)) for _ in range(steps)],
                grouped=draw(st.booleans()) if count == 1 else True,
                mode=draw(st.sampled_from(["eager"] * 11 + ["function"])),
                seed=draw(_seed))


def compressor_cases(count: int) -> List[Case]:
    cases = _collect(compressor_case(), count)
    for index, case in enumerate(cases):
        case["id"] = f"z{index}"
    return cases


def describe(case: Case) -> str:
    """The case's parameters, for a failure message."""
    return ", ".join(f"{k}={v!r}" for k, v in case.items())


# --- ranks that disagree on the compressor ---------------------------------------

def _setting(name: str, first: Any, other: Any) -> List[str]:
    """What the error says when ranks disagree on one setting (rank 1 has ``other``)."""
    return [f"compressor setting {name} of tensor", f"rank 0 has {first}", f"has {other}"]


def _kind(first: str, other: str) -> List[str]:
    return ["compressor of tensor", f"rank 0 has {first}", f"has {other}"]


#: label: (rank 0's compressor, the other ranks', words the error must contain, grouped),
#: the compressors as functions of tfdist.Compression (None: no compression).
DISAGREEMENTS = {
    "topk.ratio": (lambda c: c.topk(0.1), lambda c: c.topk(0.3), _setting("ratio", 0.1, 0.3),
                   False),
    "topk.momentum": (lambda c: c.topk(0.1, momentum=0.5), lambda c: c.topk(0.1, momentum=0.9),
                      _setting("momentum", 0.5, 0.9), False),
    "topk.error_feedback": (lambda c: c.topk(0.1), lambda c: c.topk(0.1, error_feedback=False),
                            _setting("error_feedback", True, False), False),
    "topk.start_step": (lambda c: c.topk(0.1), lambda c: c.topk(0.1, start_step=2),
                        _setting("start_step", 0, 2), False),
    "powersgd.rank": (lambda c: c.powersgd(1), lambda c: c.powersgd(2),
                      _setting("rank", 1, 2), False),
    "powersgd.error_feedback": (lambda c: c.powersgd(1),
                                lambda c: c.powersgd(1, error_feedback=False),
                                _setting("error_feedback", True, False), True),
    "powersgd.start_step": (lambda c: c.powersgd(1), lambda c: c.powersgd(1, start_step=1),
                            _setting("start_step", 0, 1), False),
    "topk-powersgd": (lambda c: c.topk(0.1), lambda c: c.powersgd(1),
                      _kind("topk", "powersgd"), False),
    "none-topk": (lambda c: None, lambda c: c.topk(0.1), _kind("none", "topk"), False),
    "fp16-topk": (lambda c: c.fp16, lambda c: c.topk(0.1), _kind("fp16", "topk"), True),
    "bf16-powersgd": (lambda c: c.bf16, lambda c: c.powersgd(2), _kind("bf16", "powersgd"),
                      False),
    "powersgd-none": (lambda c: c.powersgd(1), lambda c: None, _kind("powersgd", "none"), True),
}
