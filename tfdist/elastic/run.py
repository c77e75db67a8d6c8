"""``tfdist.elastic.run``: call a training function again, on the new membership, after a failure."""
from __future__ import annotations

import functools
import time
import warnings
from typing import Any, Callable, TypeVar

from tfdist.elastic import membership
from tfdist.elastic.errors import as_ranks_changed, is_ranks_changed

Result = TypeVar("Result")


def run(fn: Callable[..., Result]) -> Callable[..., Result]:
    """Decorator: ``fn(state, *args, **kwargs)`` survives ranks failing and joining.

    The wrapper first syncs ``state`` from rank 0 (a replacement gets the
    survivors' state this way), then calls ``fn``. When the membership
    changes inside it (a collective raises ``RanksChangedError``, or its
    TensorFlow error says so), every rank recovers: the runtime is rebuilt
    over the survivors plus replacements up to --max-np, ``state`` goes back
    to its last commit, is synced from the new rank 0, its reset callbacks
    run, and ``fn`` is called again. Without ``tfdistrun --elastic`` (or
    without MPI's fault tolerance) it calls ``fn`` once and warns once why
    recovery is off; a RanksChangedError then ends the job as any error does.
    """

    if not callable(fn):
        raise TypeError("tfdist.elastic.run decorates a function fn(state, ...), got "
                        f"{fn!r} ({type(fn).__name__})")

    @functools.wraps(fn)
    def wrapper(state: Any, *args: Any, **kwargs: Any) -> Result:
        off = membership.elastic_off_reason()
        if off is not None:
            _warn_once(f"tfdist.elastic.run: elastic recovery is off ({off}); "
                       f"{getattr(fn, '__name__', 'the function')} runs once, and a failed "
                       "rank ends the job.")
            try:
                return fn(state, *args, **kwargs)
            except Exception as error:
                if is_ranks_changed(error):
                    raise as_ranks_changed(error) from error
                raise
        # Rank 0 starts its warm spares at the first commit (docs/elastic.md).
        membership.schedule_spares()
        synced = False
        while True:
            try:
                if not synced:
                    state.sync()
                    synced = True
                result = fn(state, *args, **kwargs)
                return result
            except Exception as error:  # noqa: BLE001  (only membership changes are handled)
                if not is_ranks_changed(error):
                    raise
            _recover(state, detected_at=time.time())
            synced = True

    return wrapper


def _recover(state: Any, detected_at: float) -> None:
    """Rebuilds the membership, then puts ``state`` back to its last commit on every rank.

    ``detected_at`` (time.time()) is when this rank saw the change; the
    recovery's phases are recorded (membership.last_recovery_phases).
    """
    while True:
        try:
            membership.recover(detected_at=detected_at)
            mark = time.perf_counter()
            state.restore()
            state.sync()
            membership.record_phase("sync_state", time.perf_counter() - mark)
            state.on_reset()
            return
        except Exception as error:  # noqa: BLE001
            if not is_ranks_changed(error):
                raise
            # Another rank failed during the recovery: recover again.


def _warn_once(message: str) -> None:
    if getattr(_warn_once, "said", False):
        return
    _warn_once.said = True  # type: ignore[attr-defined]
    warnings.warn(message, RuntimeWarning, stacklevel=3)
