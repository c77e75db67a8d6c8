"""The communicator the runtime runs over, and a replacement process joining its job.

Python owns the user-level communicator; ``tfdist.init`` records the one it
started over here, and elastic recovery (tfdist/elastic/membership.py)
revokes and shrinks it. A process spawned by elastic recovery has a parent
communicator: its ``init()`` merges with it (the survivors wait in their
merge) instead of starting over COMM_WORLD. Below tfdist.runtime; imports no
other tfdist module.
"""
from __future__ import annotations

from typing import Any, Callable, Optional


class _Record:
    """The communicator of the running runtime, and whether this process joined one."""

    def __init__(self) -> None:
        self.comm: Any = None
        self.joined = False
        # In a warm spare (tfdist/elastic/warm_spare.py): waits until the job
        # needs this process, returns the job's communicator with it.
        self.spare_wait: Optional[Callable[[], Any]] = None


# Belongs with the one runtime handle: the communicator that handle runs over.
_record = _Record()


def for_init(comm: Any) -> Any:
    """The communicator ``tfdist.init(comm)`` starts over.

    ``comm`` itself when given; else, in a warm spare, the job's
    communicator once it needs this process (``wait_as_spare``); in a
    replacement spawned by elastic recovery, its parent job's communicator
    merged with it (the survivors first); else COMM_WORLD.
    """
    from mpi4py import MPI

    if comm is not None:
        return comm
    if _record.spare_wait is not None:
        wait, _record.spare_wait = _record.spare_wait, None
        merged = wait()
        _record.joined = True
        return merged
    parent = MPI.Comm.Get_parent()
    if parent != MPI.COMM_NULL and not _record.joined:
        parent.Set_errhandler(MPI.ERRORS_RETURN)
        merged = parent.Merge(high=True)
        merged.Set_errhandler(MPI.ERRORS_RETURN)
        _record.joined = True
        return merged
    return MPI.COMM_WORLD


def wait_as_spare(wait: Callable[[], Any]) -> None:
    """Makes this process a warm spare: its ``init()`` calls ``wait`` (which blocks until
    the job needs it and returns the job's communicator, or ends the process)."""
    _record.spare_wait = wait


def remember(comm: Any) -> None:
    """Records the communicator the runtime now runs over (init() calls it)."""
    _record.comm = comm


def current() -> Any:
    """The communicator the runtime runs over, or last ran over (COMM_WORLD before any)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD if _record.comm is None else _record.comm


def joined() -> bool:
    """Whether this process was spawned by elastic recovery and joined its parent's job."""
    return _record.joined
