"""Preemption: how every rank learns, at the same step, that the job was asked to stop.

``tfdistrun`` answers SIGTERM by creating the file named in
TFDIST_PREEMPT_FILE (signals forwarded by mpirun reach ranks at different
moments, or not at all on other hosts, and mpirun kills them soon after).
A rank only sees the file if it runs on the launcher's host, so the ranks
agree through one allreduce (max) of a one-element flag: if any rank saw it,
all of them stop after the same step. The check costs one tiny collective;
``BackupAndRestore`` makes it every ``preemption_check_every`` batches
(docs/fault_tolerance.md has the measured cost).

tfdistrun waits for the ranks to save only if one of them watches for the
request: ``watch()`` (called by ``preempted()`` and by ``BackupAndRestore``
when training starts) creates TFDIST_PREEMPT_FILE + ".watched". In a job
that never checks, a SIGTERM is passed on to the ranks at once, since
waiting would save nothing.
"""
from __future__ import annotations

import os

import numpy as np

from tfdist import ops
from tfdist.config import LaunchInfo

#: The exit code of every rank, and of tfdistrun, after a preemption checkpoint
#: was saved (EX_TEMPFAIL: "try again later"). tfdistrun --restarts does not
#: restart a job that exits with it.
PREEMPTED_EXIT_CODE = 75


#: Appended to TFDIST_PREEMPT_FILE for the file that says a rank watches
#: (tfdistrun.WATCHED_SUFFIX: the launcher does not import tfdist).
WATCHED_SUFFIX = ".watched"


def watch() -> None:
    """Tells tfdistrun that this job answers a preemption request by saving.

    After this, a SIGTERM to tfdistrun becomes a request (the ranks get
    ``--preempt-grace`` seconds to save and exit) instead of ending the job
    at once. Does nothing outside tfdistrun or when the flag's folder is not
    on this host.
    """
    flag = LaunchInfo.from_environment().preempt_file
    if not flag:
        return
    try:
        with open(flag + WATCHED_SUFFIX, "a"):
            pass
    except OSError:
        pass  # a rank on another host: a rank on the launcher's host tells it


def requested_here() -> bool:
    """True once the launcher of this job was asked to stop, as seen by this process alone."""
    flag = LaunchInfo.from_environment().preempt_file
    return bool(flag) and os.path.exists(flag)


def preempted() -> bool:
    """Collective: True on every rank if any rank's launcher was asked to stop.

    Every rank must call it at the same points (e.g. every 10 steps), like
    any collective; all ranks get the same answer, so they can all save the
    same step and exit with PREEMPTED_EXIT_CODE.
    """
    watch()
    flag = np.array([1 if requested_here() else 0], dtype=np.int32)
    return bool(ops.allreduce(flag, op=ops.Max, name="tfdist.preempted").numpy()[0])


def restart_count() -> int:
    """TFDIST_RESTART: 0 on the job's first run, n on the n-th restart by tfdistrun --restarts."""
    return LaunchInfo.from_environment().restart
