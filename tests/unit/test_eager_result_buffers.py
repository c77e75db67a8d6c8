"""The eager fast path's result buffers (tfdist/_eager.py): taken again only when free."""
import numpy as np

from tfdist import _eager


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_a_buffer_is_aligned_and_taken_again_once_nothing_uses_it():
    buffers = _eager._ResultBuffers()
    first = buffers.take(1000)
    assert first.dtype == np.uint8 and first.nbytes == 1000
    assert _address(first) % _eager._TENSOR_ALIGNMENT == 0
    result = first.view(np.float32).reshape(10, 25)  # what _new_result makes of it
    del first
    second = buffers.take(1000)
    assert _address(second) != _address(result), "a buffer in use was taken"
    del result, second
    assert _address(buffers.take(1000)) % _eager._TENSOR_ALIGNMENT == 0


def test_the_array_taken_holds_its_buffer():
    # Two calls in a row, as two threads' calls may come: the first array, not yet
    # viewed by its caller, must not be handed out again.
    buffers = _eager._ResultBuffers()
    first = buffers.take(4096, np.dtype(np.float32), (32, 32))
    second = buffers.take(4096, np.dtype(np.float32), (32, 32))
    assert first.shape == second.shape == (32, 32) and first.dtype == np.float32
    assert _address(first) != _address(second), "a buffer in use was taken"
    assert _address(first) % _eager._TENSOR_ALIGNMENT == 0
    assert _address(second) % _eager._TENSOR_ALIGNMENT == 0
    address = _address(first)
    del first
    assert _address(buffers.take(4096)) == address  # free again once dropped


def test_a_chain_of_calls_takes_turns_between_two_buffers(monkeypatch):
    allocations = []
    allocate = _eager._ResultBuffers._allocate
    monkeypatch.setattr(_eager._ResultBuffers, "_allocate",
                        staticmethod(lambda nbytes: allocations.append(nbytes) or allocate(nbytes)))
    buffers = _eager._ResultBuffers()
    previous = buffers.take(4096).view(np.float64)
    seen = [_address(previous)]
    for _ in range(6):  # x = allreduce(x): the previous result lives during the call
        current = buffers.take(4096).view(np.float64)
        previous = current
        seen.append(_address(current))
    # Counted, since malloc could hand a freed buffer's address out again.
    assert allocations == [4096, 4096], allocations
    assert len(set(seen)) == 2 and seen[0::2] == [seen[0]] * 4, seen


def test_a_view_of_a_view_still_holds_its_buffer():
    buffers = _eager._ResultBuffers()
    held = buffers.take(256).view(np.int32).reshape(8, 8)[2:4].T
    others = {_address(buffers.take(256)) for _ in range(3)}  # dropped at once: free
    assert len(others) == 1 and _address(held) - 2 * 8 * 4 not in others


def test_every_size_past_the_limit_drops_the_least_recently_used():
    buffers = _eager._ResultBuffers()
    sizes = [64 * (k + 1) for k in range(buffers.LIMIT + 1)]
    kept = {}
    for nbytes in sizes:
        kept[nbytes] = buffers.take(nbytes)
    assert len(buffers._buffers) == buffers.LIMIT and sizes[0] not in buffers._buffers
    kept.clear()
    first = _address(buffers.take(sizes[1]))  # the oldest kept size, now free
    assert first == _address(buffers.take(sizes[1]))
