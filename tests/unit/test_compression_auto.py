"""Compression.auto's decision rule (tfdist/compression/auto.py) against an analytic
numpy reference, without a job: the predicted times of each choice, the choice itself,
where it crosses over as the link gets slower, and the arguments it refuses (the choice
agreed across ranks and the results under mpirun: tests/workers/compression_dense_worker.py)."""
import math

import numpy as np
import pytest

from tfdist.compression import auto
from tfdist.compression.auto import CompressionCosts, TensorSpec

# The digits CNN's gradients (benchmarks/compression.py), float32.
CNN = [(3, 3, 1, 16), (16,), (3, 3, 16, 32), (32,), (512, 64), (64,), (64, 10), (10,)]
# The wide MLP's (flatten 64 -> 2048 -> 2048 -> 10).
WIDE_MLP = [(64, 2048), (2048,), (2048, 2048), (2048,), (2048, 10), (10,)]
COSTS = CompressionCosts(cast_per_byte=0.25e-9, powersgd_fixed=40e-6,
                         powersgd_per_byte=0.5e-9)


def specs(shapes, itemsize=4, floating=True):
    return [TensorSpec(tuple(s), itemsize, floating) for s in shapes]


def link(latency, seconds_per_byte):
    """An allreduce of b bytes: one latency and the bytes at the link's pace."""
    return lambda nbytes: latency + seconds_per_byte * nbytes


def reference(shapes, latency, per_byte, costs, rank):
    """The rule of docs/compression.md, "Compression.auto", written out in numpy."""
    elements = np.array([np.prod(s) for s in shapes], dtype=np.float64)
    dense = 4 * elements.sum()
    A = lambda b: 0.0 if b == 0 else latency + per_byte * b  # noqa: E731
    none = A(dense)
    half = A(2 * elements.sum()) + costs.cast_per_byte * dense
    n = np.array([np.prod(s[:-1]) if len(s) >= 2 else 0 for s in shapes], dtype=np.float64)
    m = np.array([s[-1] if len(s) >= 2 else 0 for s in shapes], dtype=np.float64)
    factored = (n > 0) & ((n + m) * rank * 2 < n * m)
    if not factored.any():
        return {"none": none, "half": half, "powersgd": math.inf}
    p_bytes = (4 * n * rank)[factored].sum() + 4 * elements[~factored].sum()
    q_bytes = (4 * m * rank)[factored].sum()
    work = (costs.powersgd_fixed + costs.powersgd_per_byte * 4 * n * m)[factored].sum()
    powersgd = A(p_bytes) + A(q_bytes) + work
    return {"none": none, "half": half, "powersgd": powersgd}


@pytest.mark.parametrize("shapes", [CNN, WIDE_MLP, [(1000,)], [(7, 5)]])
@pytest.mark.parametrize("latency, per_byte", [(5e-6, 0.2e-9), (50e-6, 0.8e-9),
                                               (200e-6, 8e-9)])
@pytest.mark.parametrize("rank", [1, 2, 4])
def test_predicted_times_match_the_numpy_reference(shapes, latency, per_byte, rank):
    got = auto.predicted_seconds(specs(shapes), link(latency, per_byte), COSTS, rank)
    want = reference(shapes, latency, per_byte, COSTS, rank)
    assert got.keys() == want.keys()
    for key in want:
        if math.isinf(want[key]):
            assert math.isinf(got[key]), key
        else:
            assert got[key] == pytest.approx(want[key], rel=1e-12), key


def choice(shapes, latency, per_byte, costs=COSTS, gain=0.8,
           candidates=("none", "half", "powersgd"), rank=2):
    predicted = auto.predicted_seconds(specs(shapes), link(latency, per_byte), costs, rank)
    return auto.choose(predicted, candidates, gain)


def test_shared_memory_sends_uncompressed_and_a_slow_link_powersgd():
    # Shared memory: a byte moves faster than it is rounded and widened.
    assert choice(CNN, 3e-6, 0.1e-9) == "none"
    assert choice(WIDE_MLP, 3e-6, 0.1e-9) == "none"
    # 1 Gb/s at P = 4 (2(P-1)/P bytes per byte at 8 ns): the factors' bytes win.
    assert choice(CNN, 100e-6, 12e-9) == "powersgd"
    assert choice(WIDE_MLP, 100e-6, 12e-9) == "powersgd"


def test_a_group_powersgd_cannot_factor_goes_as_the_faster_dense_choice():
    biases = [(2048,), (64,), (10,)]
    assert auto.predicted_seconds(specs(biases), link(1e-5, 1e-9), COSTS, 2)["powersgd"] \
        == math.inf
    assert choice(biases, 100e-6, 12e-9) == "half"
    assert choice(biases, 3e-6, 0.1e-9) == "none"


def test_none_against_the_cast_crosses_where_the_analytic_rule_says():
    # All float32, N elements: none = L + 4N·G, half = L + 2N·G + 4N·c, and half must
    # be at most HALF_GAIN (h) of none: G >= ((1 - h)·L + 4N·c) / ((4h - 2)·N).
    c, h, latency = COSTS.cast_per_byte, auto.HALF_GAIN, 1e-5
    n = sum(np.prod(s) for s in WIDE_MLP)
    crossing = ((1 - h) * latency + 4 * n * c) / ((4 * h - 2) * n)
    only_dense = ("none", "half")
    assert choice(WIDE_MLP, latency, crossing * 0.99, candidates=only_dense) == "none"
    assert choice(WIDE_MLP, latency, crossing * 1.01, candidates=only_dense) == "half"
    # A tie, or a saving within the margin, goes to none; so does a tiny tensor.
    for half in (1.0, 0.91):
        assert auto.choose({"none": 1.0, "half": half, "powersgd": math.inf},
                           ("none", "half", "powersgd"), 0.8) == "none"
    assert choice([(4, 1)], 5e-6, 0.1e-9, costs=CompressionCosts(0.0, 0.0, 0.0)) == "none"


def test_the_choice_moves_one_way_as_the_link_slows():
    order = {"none": 0, "half": 1, "powersgd": 2}
    for shapes in (CNN, WIDE_MLP):
        seen = [order[choice(shapes, 20e-6, g)] for g in np.geomspace(0.02e-9, 50e-9, 60)]
        assert seen == sorted(seen), (shapes, seen)
        assert seen[0] == 0 and seen[-1] == 2


def test_powersgd_needs_the_gain():
    predicted = {"none": 10.0, "half": 8.0, "powersgd": 6.4}
    assert auto.choose(predicted, ("none", "half", "powersgd"), 0.8) == "powersgd"
    assert auto.choose(predicted, ("none", "half", "powersgd"), 0.79) == "half"
    assert auto.choose(predicted, ("none", "powersgd"), 0.64) == "powersgd"  # 6.4 <= 6.4
    assert auto.choose(predicted, ("none", "powersgd"), 0.63) == "none"
    assert auto.choose(predicted, ("half", "powersgd"), 0.79) == "half"
    assert auto.choose(predicted, ("none", "half"), 1.0) == "half"
    assert auto.choose(predicted, ("powersgd",), 0.5) == "powersgd"


def test_unknown_shapes_and_integer_tensors():
    unknown = [TensorSpec(None, 4, True), TensorSpec((100, 100), 4, True)]
    assert auto.choose(auto.predicted_seconds(unknown, link(1e-4, 1e-8), COSTS, 2),
                       ("none", "half", "powersgd"), 0.8) == "none"
    # Integers are neither cast nor factored: only none and PowerSGD's dense part remain.
    ints = specs([(512, 512)], floating=False)
    predicted = auto.predicted_seconds(ints, link(1e-4, 1e-8), COSTS, 2)
    assert predicted["half"] == predicted["none"] and math.isinf(predicted["powersgd"])
    # float64 is cast straight to 16 bits: a quarter of its bytes on the wire.
    doubles = auto.predicted_seconds(specs([(1000,)], itemsize=8), link(0.0, 1.0),
                                     CompressionCosts(0.0, 0.0, 0.0), 2)
    assert doubles == {"none": 8000.0, "half": 2000.0, "powersgd": math.inf}


def test_factored_tensors_follow_powersgd():
    for shape in [(3, 3, 1, 16), (512, 64), (64, 10), (2, 2), (5,)]:
        spec = TensorSpec(shape, 4, True)
        n, m = int(np.prod(shape[:-1])), shape[-1]
        expected = (n, m) if len(shape) >= 2 and (n + m) * 2 * 2 < n * m else None
        assert auto.powersgd_factors(spec, 2) == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"half": "int8"}, "half must be 'bf16' or 'fp16'"),
    ({"candidates": []}, "candidates must be a non-empty list"),
    ({"candidates": "none"}, "candidates must be a non-empty list"),
    ({"candidates": ("none", "topk")}, "candidates must be distinct names"),
    ({"candidates": ("bf16", "half")}, "candidates must be distinct names"),
    ({"powersgd_gain": 0.0}, "powersgd_gain must be a number in"),
    ({"powersgd_gain": 1.5}, "powersgd_gain must be a number in"),
    ({"powersgd_gain": True}, "powersgd_gain must be a number in"),
    ({"powersgd_rank": 0}, "rank must be an integer >= 1"),
])
def test_bad_arguments_are_named(kwargs, message):
    from tfdist.compression import Compression
    with pytest.raises(ValueError, match=message):
        Compression.auto(**kwargs)


def test_config_round_trip_and_names():
    from tfdist.compression import Compression, as_compressor
    compressor = Compression.auto(powersgd_rank=4, half="fp16", candidates=("none", "fp16"),
                                  powersgd_gain=0.5)
    config = compressor.get_config()
    assert config == {"name": "auto", "powersgd_rank": 4, "half": "fp16",
                      "candidates": ["none", "half"], "powersgd_gain": 0.5}
    assert Compression.from_config(config).get_config() == config
    assert isinstance(as_compressor("auto"), auto.AutoCompressor)
    assert as_compressor("AUTO").get_config() == Compression.auto().get_config()
    assert as_compressor("auto") is as_compressor("auto")  # its decisions are kept


def test_decisions_are_kept_per_group_and_forgotten_when_the_ranks_change(monkeypatch):
    """decide() without a job: the link and the agreement collectives stubbed."""
    from tfdist import _communicator
    compressor = auto.AutoCompressor()
    agreed = []
    monkeypatch.setattr(auto, "fastest_allreduce_seconds", link(100e-6, 12e-9))
    monkeypatch.setattr(auto.AutoCompressor, "costs", lambda self, name, process_set=None: COSTS)
    monkeypatch.setattr(auto.AutoCompressor, "_check_agreed",
                        staticmethod(lambda choice, key, collective, ps: agreed.append(key)))
    world, shrunk = object(), object()
    monkeypatch.setattr(_communicator, "current", lambda: world)
    group = specs(CNN)
    first = compressor.decide(group, "g", ranks=4)
    assert first.choice == "powersgd" and agreed == ["g"]
    assert compressor.decide(group, "g", ranks=4) is first and agreed == ["g"]  # cached
    # Other shapes under the same name are decided again; one rank decides "none" alone.
    assert compressor.decide(specs([(100000,)]), "g", ranks=4).choice == "bf16"
    assert compressor.decide(group, "one", ranks=1).choice == "none"
    assert agreed == ["g", "g"]
    # After elastic recovery (a new communicator) every rank agrees afresh.
    monkeypatch.setattr(_communicator, "current", lambda: shrunk)
    assert compressor.decide(group, "g", ranks=3).choice == "powersgd"
    assert agreed == ["g", "g", "g"] and set(compressor.choices()) == {"g"}
    # On a process set PowerSGD is not a candidate.
    assert compressor.decide(group, "set", process_set=object(), ranks=2).choice == "bf16"
