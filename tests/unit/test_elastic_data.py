"""tfdist.elastic.data: every sample of an epoch trained on exactly once across size changes.

Generated histories (Hypothesis, derandomized): an epoch runs in segments,
each at its own number of ranks and per-rank batch size; a segment commits
after some steps and may run a few more that a failure then rolls back. The
reference is a plain count per sample (numpy bincount) of what the ranks
read in committed steps: at the end of the epoch every sample counts
exactly once, and after every commit what was read is exactly the first
``position`` samples of the epoch's order.
"""
import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from tfdist.elastic import data

SETTINGS = settings(derandomize=True, database=None, max_examples=300, deadline=None,
                    phases=[Phase.generate])


def read_in_steps(num_samples, epoch, position, size, batch_size, steps, seed, shuffle):
    """What each rank of ``size`` reads in ``steps`` steps from ``position``: per step, the
    ranks' batches."""
    per_rank = [data.rank_indices(num_samples, epoch, position, rank, size, seed=seed,
                                  shuffle=shuffle) for rank in range(size)]
    return [[indices[k * batch_size:(k + 1) * batch_size] for indices in per_rank]
            for k in range(steps)]


segment = st.tuples(st.integers(1, 7),    # ranks
                    st.integers(1, 9),    # per-rank batch size
                    st.integers(0, 12),   # steps committed
                    st.integers(0, 3))    # steps run after the commit, lost to a failure


@SETTINGS
@given(num_samples=st.integers(0, 400), epoch=st.integers(0, 5), seed=st.integers(0, 2**31),
       shuffle=st.booleans(), segments=st.lists(segment, max_size=8),
       final=st.tuples(st.integers(1, 7), st.integers(1, 9)))
def test_each_sample_once_across_size_changes(num_samples, epoch, seed, shuffle, segments,
                                              final):
    counts = np.zeros(num_samples, np.int64)
    order = data.epoch_order(num_samples, epoch, seed, shuffle)
    position = 0
    for size, batch_size, committed, lost in segments:
        steps = read_in_steps(num_samples, epoch, position, size, batch_size,
                              committed + lost, seed, shuffle)
        for step in steps[:committed]:
            read = np.concatenate(step).astype(np.int64)
            assert len(np.unique(read)) == len(read), "two ranks read one sample in a step"
            counts += np.bincount(read, minlength=num_samples)
        position = data.advance(position, size, batch_size, committed, num_samples)
        # What was read is exactly the prefix of the epoch's order the position names.
        expected = np.zeros(num_samples, np.int64)
        expected[order[:position]] = 1
        np.testing.assert_array_equal(counts, expected)
    size, batch_size = final
    steps = data.steps_remaining(num_samples, position, size, batch_size)
    for step in read_in_steps(num_samples, epoch, position, size, batch_size, steps, seed,
                              shuffle):
        counts += np.bincount(np.concatenate(step).astype(np.int64), minlength=num_samples)
    assert data.advance(position, size, batch_size, steps, num_samples) == num_samples
    np.testing.assert_array_equal(counts, np.ones(num_samples, np.int64))


@SETTINGS
@given(num_samples=st.integers(0, 300), position_share=st.floats(0, 1),
       size=st.integers(1, 9), batch_size=st.integers(1, 9))
def test_steps_remaining_is_the_longest_ranks_batches(num_samples, position_share, size,
                                                      batch_size):
    position = int(position_share * num_samples)
    lengths = [len(data.rank_indices(num_samples, 3, position, rank, size, seed=1))
               for rank in range(size)]
    assert sum(lengths) == num_samples - position
    assert max(lengths) - min(lengths) <= 1
    expected = max(-(-length // batch_size) for length in lengths)
    assert data.steps_remaining(num_samples, position, size, batch_size) == expected


def test_epoch_order_is_a_seeded_permutation_per_epoch():
    first = data.epoch_order(1000, 0, seed=7)
    np.testing.assert_array_equal(np.sort(first), np.arange(1000))
    np.testing.assert_array_equal(first, data.epoch_order(1000, 0, seed=7))
    assert not np.array_equal(first, data.epoch_order(1000, 1, seed=7))
    assert not np.array_equal(first, data.epoch_order(1000, 0, seed=8))
    np.testing.assert_array_equal(data.epoch_order(10, 4, shuffle=False), np.arange(10))
    assert data.epoch_order(10, 0).dtype == np.int64


def test_round_robin_deal_of_the_rest():
    order = data.epoch_order(23, 2, seed=5)
    for size in range(1, 6):
        for rank in range(size):
            np.testing.assert_array_equal(data.rank_indices(23, 2, 9, rank, size, seed=5),
                                          order[9:][rank::size])


@pytest.mark.parametrize("call, message", [
    (lambda: data.rank_indices(10, 0, 11, 0, 2), "position 11 is past the epoch's 10"),
    (lambda: data.rank_indices(10, 0, 0, 2, 2), "rank must be in [0, size=2)"),
    (lambda: data.rank_indices(10, 0, 0, 0, 0), "size must be an integer >= 1"),
    (lambda: data.rank_indices(10, -1, 0, 0, 1), "epoch must be an integer >= 0"),
    (lambda: data.advance(0, 2, 0, 1, 10), "batch_size must be an integer >= 1"),
    (lambda: data.steps_remaining(10, True, 1, 1), "position must be an integer >= 0"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value)
