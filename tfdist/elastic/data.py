"""Which samples each rank reads in an elastic epoch, so that each is processed exactly once.

An epoch visits the samples in one order, the same on every rank and for
every number of ranks (``epoch_order``: a permutation seeded by ``seed`` and
the epoch, or 0..n-1 without shuffling). ``position`` counts the samples of
that order already processed, by all ranks together, at the last commit.
The rest of the order is dealt out round-robin: rank ``r`` of ``size`` reads

    epoch_order(...)[position:][r::size]             # rank_indices(...)

in batches of ``batch_size``. After ``k`` steps of every rank, the samples
read are exactly the first ``k * size * batch_size`` of what remained (the
union of the ranks' first ``k`` batches of a round-robin deal is a
prefix), so the new position is ``position + k * size * batch_size``
(``advance``), capped at the epoch's end. A commit records that position;
after a membership change the ranks restore it and deal the rest among the
new number of ranks. Work after the last commit is rolled back with the
weights, so its samples are read again, and every sample of the epoch is
trained on exactly once in the committed history, whatever the changes.

With tf.data (the state carries ``epoch`` and ``position``)::

    indices = tfdist.elastic.data.rank_indices(len(x), state.epoch, state.position,
                                               hvd.rank(), hvd.size(), seed=42)
    dataset = (tf.data.Dataset.from_tensor_slices(indices)
               .batch(batch_size)
               .map(lambda i: (tf.gather(x, i), tf.gather(y, i))))
    for batch_x, batch_y in dataset:
        train_step(batch_x, batch_y)
        state.position = tfdist.elastic.data.advance(state.position, hvd.size(), batch_size, 1, len(x))
        state.commit()

The ranks' last batch of an epoch may be smaller than ``batch_size``, and
some ranks may then have one batch fewer than others when fewer samples than
ranks remain (``steps_remaining`` is the number of steps of the rank with
the most); a loop that runs collectives must make every rank run the same
number of steps (e.g. ``steps_remaining`` steps, a rank without data
contributing zero gradients through ``tfdist.join``, or dropping the tail
by giving ``num_samples`` rounded down).
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["advance", "epoch_order", "rank_indices", "steps_remaining"]


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def epoch_order(num_samples: int, epoch: int, seed: int = 0,
                shuffle: bool = True) -> np.ndarray:
    """The order (int64 sample indices) in which epoch ``epoch`` visits the samples.

    The same on every rank and for every number of ranks: a permutation
    drawn from ``seed`` and ``epoch`` alone, or ``0..num_samples-1`` with
    ``shuffle=False``.
    """
    num_samples = _count("num_samples", num_samples, 0)
    epoch = _count("epoch", epoch, 0)
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    seed = _count("seed", seed, 0)
    return np.random.default_rng([seed, epoch]).permutation(num_samples).astype(np.int64)


def rank_indices(num_samples: int, epoch: int, position: int, rank: int, size: int,
                 seed: int = 0, shuffle: bool = True) -> np.ndarray:
    """The sample indices rank ``rank`` of ``size`` reads, in order, for the rest of epoch
    ``epoch`` after ``position`` samples of it were processed across all ranks."""
    size = _count("size", size, 1)
    rank = _count("rank", rank, 0)
    if rank >= size:
        raise ValueError(f"rank must be in [0, size={size}), got {rank}")
    order = epoch_order(num_samples, epoch, seed, shuffle)
    position = _count("position", position, 0)
    if position > len(order):
        raise ValueError(f"position {position} is past the epoch's {len(order)} samples")
    return order[position:][rank::size]


def advance(position: int, size: int, batch_size: int, steps: int, num_samples: int) -> int:
    """The position after every one of ``size`` ranks ran ``steps`` more steps of
    ``batch_size`` samples from ``position`` (capped at ``num_samples``, the epoch's end)."""
    position = _count("position", position, 0)
    size = _count("size", size, 1)
    batch_size = _count("batch_size", batch_size, 1)
    steps = _count("steps", steps, 0)
    num_samples = _count("num_samples", num_samples, 0)
    return min(num_samples, position + steps * size * batch_size)


def steps_remaining(num_samples: int, position: int, size: int, batch_size: int) -> int:
    """How many steps of ``batch_size`` the rank with the most samples has left in the epoch
    (ceil of the remaining samples over ``size * batch_size``)."""
    num_samples = _count("num_samples", num_samples, 0)
    position = _count("position", position, 0)
    size = _count("size", size, 1)
    batch_size = _count("batch_size", batch_size, 1)
    remaining = max(0, num_samples - position)
    return -(-remaining // (size * batch_size))
