"""scikit-learn's bundled 8x8 digits (offline), split once and sharded by rank for the examples."""
from __future__ import annotations

from typing import Tuple

import numpy as np


def load_shards(rank: int, size: int, validation_fraction: float = 0.2,
                seed: int = 0) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train) for this rank's shard, and the whole validation set.

    The split and the shuffle use a fixed seed, so every rank agrees on them;
    rank r then takes every size-th training example starting at r, so the
    shards are disjoint and together cover the training set.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images.astype("float32") / 16.0)[..., None]  # 1797 x 8 x 8 x 1, in [0, 1]
    y = digits.target.astype("int64")
    order = np.random.RandomState(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_validation = int(len(x) * validation_fraction)
    x_val, y_val = x[:n_validation], y[:n_validation]
    x_train, y_train = x[n_validation:], y[n_validation:]
    return x_train[rank::size], y_train[rank::size], x_val, y_val
