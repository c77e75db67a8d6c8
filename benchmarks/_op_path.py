"""Allreduces timed through TensorFlow's op where the eager fast path would take them.

Every eager ``tfdist.allreduce`` of a CPU tensor up to ``FAST_PATH_MAX_BYTES``,
forced algorithm or not, skips the op (tfdist/_eager.py). Benchmarks that
measure the op's dispatch, or the memory TensorFlow allocates for its output,
wrap their call in ``through_op``.
"""
from __future__ import annotations

from typing import Any, Callable


def through_op(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call``, made to run with the fast path's size limit at 0, so that it takes the op."""
    from tfdist import _eager

    def wrapped() -> Any:
        limit, _eager.FAST_PATH_MAX_BYTES = _eager.FAST_PATH_MAX_BYTES, 0
        try:
            return call()
        finally:
            _eager.FAST_PATH_MAX_BYTES = limit
    return wrapped
