"""Shared pieces of the Keras workers: a tiny model, per-rank data, and the independent reference.

The reference never calls tfdist: every rank regenerates every rank's data
(seeded by rank), computes each rank's gradient with a plain GradientTape on
a plain copy of the model, averages them in numpy and applies SGD with
momentum in numpy. What the distributed run must produce is exactly that.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

INPUTS, HIDDEN, OUTPUTS = 4, 5, 3
BATCH = 6


def make_model() -> keras.Model:
    """A small MLP with fixed, rank-independent initial weights."""
    model = keras.Sequential([keras.Input((INPUTS,)),
                              keras.layers.Dense(HIDDEN, activation="tanh"),
                              keras.layers.Dense(OUTPUTS)])
    model.set_weights(initial_weights())
    return model


def initial_weights() -> List[np.ndarray]:
    rng = np.random.RandomState(0)
    return [rng.normal(0, 0.5, (INPUTS, HIDDEN)).astype("float32"),
            rng.normal(0, 0.1, HIDDEN).astype("float32"),
            rng.normal(0, 0.5, (HIDDEN, OUTPUTS)).astype("float32"),
            rng.normal(0, 0.1, OUTPUTS).astype("float32")]


def rank_data(rank: int, steps: int, batch: int = BATCH):
    """``steps`` batches of (x, y) for ``rank``, different on every rank."""
    # Drawn from one fixed-size pool, so that the first k batches are the
    # same whatever ``steps`` is.
    rng = np.random.RandomState(100 + rank)
    pool = max(steps, 8) * batch
    x = rng.normal(0, 1, (pool, INPUTS)).astype("float32")
    y = rng.normal(rank, 1, (pool, OUTPUTS)).astype("float32")
    return x[:steps * batch], y[:steps * batch]


_REFERENCE_MODELS: List[keras.Model] = []


def _reference_model() -> keras.Model:
    if not _REFERENCE_MODELS:
        _REFERENCE_MODELS.append(keras.Sequential([
            keras.Input((INPUTS,)), keras.layers.Dense(HIDDEN, activation="tanh"),
            keras.layers.Dense(OUTPUTS)]))
    return _REFERENCE_MODELS[0]


def local_gradients(weights: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray,
                    scale: float = 1.0) -> List[np.ndarray]:
    """Gradient of the mean-squared error on (x, y) at ``weights``, without tfdist."""
    model = _reference_model()
    model.set_weights(list(weights))
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, model(x)) * scale
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def reference_sgd(size: int, steps: int, lr: float, momentum: float = 0.0,
                  passes_per_update: int = 1, average_passes: bool = False,
                  global_clipnorm: Optional[float] = None,
                  mean: Callable = lambda grads: np.mean(grads, axis=0),
                  rank_steps: Optional[Sequence[int]] = None) -> List[np.ndarray]:
    """Weights after ``steps`` batches of data-parallel SGD on ``size`` ranks, in numpy.

    With ``rank_steps``, rank r has only ``rank_steps[r]`` batches and
    contributes a zero gradient after them (what a rank that has called
    tfdist.join() does), still counted in the mean.
    """
    weights = [w.astype("float64") for w in initial_weights()]
    velocity = [np.zeros_like(w) for w in weights]
    data = [rank_data(r, steps) for r in range(size)]
    accumulated = [[np.zeros_like(w) for w in weights] for _ in range(size)]
    for step in range(steps):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        for r in range(size):
            if rank_steps is not None and step >= rank_steps[r]:
                continue  # out of data: adds nothing
            grads = local_gradients([w.astype("float32") for w in weights],
                                    data[r][0][rows], data[r][1][rows])
            accumulated[r] = [a + g for a, g in zip(accumulated[r], grads)]
        if (step + 1) % passes_per_update:
            continue
        divisor = passes_per_update if average_passes else 1
        averaged = [mean([accumulated[r][i] / divisor for r in range(size)])
                    for i in range(len(weights))]
        accumulated = [[np.zeros_like(w) for w in weights] for _ in range(size)]
        if global_clipnorm is not None:
            norm = np.sqrt(sum(np.sum(g * g) for g in averaged))
            if norm > global_clipnorm:
                averaged = [g * global_clipnorm / norm for g in averaged]
        for i, g in enumerate(averaged):
            velocity[i] = momentum * velocity[i] - lr * g
            weights[i] = weights[i] + velocity[i]
    return weights


def assert_weights(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], what: str,
                   tolerance: float = 2e-5) -> None:
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=tolerance, atol=tolerance,
                                   err_msg=f"{what}: weight {i} differs from the reference")


def gather_all(array: np.ndarray, name: str) -> np.ndarray:
    """Every rank's ``array``, stacked (rank-major), via tfdist.allgather."""
    import tfdist
    return tfdist.allgather(tf.constant(np.asarray(array)[None]), name=name).numpy()


def assert_same_on_all_ranks(weights: Sequence[np.ndarray], what: str) -> None:
    for i, w in enumerate(weights):
        every = gather_all(w, f"check.{what}.{i}")
        for r in range(1, len(every)):
            np.testing.assert_array_equal(every[r], every[0],
                                          err_msg=f"{what}: weight {i} differs on rank {r}")


def differs_somewhere(weights: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> bool:
    return any(not np.allclose(a, e, rtol=1e-4, atol=1e-4) for a, e in zip(weights, expected))
