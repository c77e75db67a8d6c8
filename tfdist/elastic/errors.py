"""The errors of elastic training: a membership change, and a job that cannot go on."""
from __future__ import annotations

#: What the native library puts in the message of every error that comes
#: from a failed peer or a revoked communicator (cc/mpi/mpi_error.h,
#: kRanksChangedMarker): the TF error of a collective, and the "tfdist has
#: stopped on this rank ... because: ..." of the collectives after it.
RANKS_CHANGED_MARKER = "[tfdist: ranks changed]"

_OUTSIDE_RUN = (
    "A process of the job failed or left, so the job's membership changed and tfdist "
    "stopped on this rank. Inside a function decorated with @tfdist.elastic.run (in a job "
    "started with tfdistrun --elastic) the survivors rebuild the runtime, go back to the "
    "last state.commit() and carry on; outside it, this rank cannot continue: restart the "
    "job (tfdistrun --restarts with a checkpoint).")


class RanksChangedError(RuntimeError):
    """The job's membership changed under a collective: a rank died, left or was evicted.

    Collectives raise it, or ``tfdist.elastic.run`` turns their TensorFlow
    error into it. Inside ``run`` it triggers the recovery; outside, its
    message says what happened and what to do.
    """

    def __init__(self, detail: str = "") -> None:
        message = _OUTSIDE_RUN
        if detail:
            message += f" What the collective reported: {detail}"
        super().__init__(message)
        self.detail = detail


class ElasticJobError(RuntimeError):
    """Elastic recovery cannot continue the job (e.g. fewer ranks than --min-np remain)."""


def is_ranks_changed(error: BaseException) -> bool:
    """Whether ``error`` says that the job's membership changed (a peer failed or left)."""
    if isinstance(error, RanksChangedError):
        return True
    get_class = getattr(error, "Get_error_class", None)  # mpi4py's MPI.Exception
    if get_class is not None:
        from mpi4py import MPI
        if get_class() in (MPI.ERR_PROC_FAILED, MPI.ERR_REVOKED):
            return True
    return RANKS_CHANGED_MARKER in str(error)


def as_ranks_changed(error: BaseException) -> RanksChangedError:
    """``error`` as a RanksChangedError (itself, or a new one carrying its message)."""
    if isinstance(error, RanksChangedError):
        return error
    text = str(error).strip().splitlines()
    return RanksChangedError(" ".join(text)[:2000])
