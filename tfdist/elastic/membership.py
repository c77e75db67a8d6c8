"""Who is in the job: the communicator tfdist runs over, and rebuilding it after a failure.

Python owns the user-level communicator (mpi4py); the native runtime runs
on private duplicates of it. After a process failure (ULFM) the survivors
stop their runtimes without waiting on peers, revoke and shrink this
communicator, check --min-np, spawn replacements back up to --max-np and
merge them in (survivors first), then start the runtime again over the new
communicator. A replacement runs the same command; its ``tfdist.init()``
finds its parent and joins the merged communicator instead of COMM_WORLD.
docs/elastic.md describes the whole sequence.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from tfdist import _communicator, config, process_sets
from tfdist.config import LaunchInfo
from tfdist.elastic import spares
from tfdist.elastic.errors import ElasticJobError


class _Recovery:
    """What this process's last recovery measured."""

    def __init__(self) -> None:
        #: Seconds each phase of the last recovery took (benchmarks/elastic.py reads it).
        self.last_phases: Dict[str, float] = {}


_current = _Recovery()


def ulfm_enabled() -> bool:
    """Whether MPI runs with its fault tolerance on (``mpirun --with-ft ulfm``)."""
    return config.ulfm_enabled()


def elastic_off_reason(info: Optional[LaunchInfo] = None) -> Optional[str]:
    """Why elastic recovery is off in this job, or None when it is on."""
    return (info or LaunchInfo.from_environment()).elastic_off_reason()


def current_communicator() -> Any:
    """The communicator the runtime runs over (COMM_WORLD before any init)."""
    return _communicator.current()


def joined_as_replacement() -> bool:
    """Whether this process was spawned by elastic recovery and joined the survivors."""
    return _communicator.joined()


def last_recovery_phases() -> Dict[str, float]:
    """Seconds each phase of this process's last recovery took (``stop_runtime``,
    ``shrink``, ``join_spares``, ``spawn``, ``rebuild_runtime``, ``sync_state``), and
    ``detected_at``: the time.time() at which this rank saw the membership change;
    ``spares_joined``: how many warm spares it merged in."""
    return dict(_current.last_phases)


def record_phase(name: str, seconds: float) -> None:
    """Adds a phase of the recovery in progress (run() times the state's sync)."""
    _current.last_phases[name] = seconds


def _spawn_command() -> List[str]:
    """sys.executable's arguments that run this process's program again."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):  # python -m package.module
        return ["-m", spec.name] + sys.argv[1:]
    return [os.path.abspath(sys.argv[0])] + sys.argv[1:]


#: What MPI_Comm_spawn's PMIX_ENVAR info adds to a replacement's environment.
#: The rest it inherits as the first ranks did: mpirun passes the variables it
#: was told to (-x: tfdistrun forwards every TFDIST_* setting, PATH and
#: PYTHONPATH) to the processes it spawns later too; an info value is too short
#: (MPI_MAX_INFO_VAL) to carry them all.
_REPLACEMENT_ENVIRONMENT = "TFDIST_ELASTIC_REPLACEMENT=1"


def _discovered_hosts(script: str, count: int) -> List[str]:
    """Hosts for ``count`` replacements from a host-discovery script's ``host[:slots]`` lines."""
    try:
        output = subprocess.run(shlex.split(script), capture_output=True, text=True,
                                timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise ElasticJobError(f"the host discovery script {script!r} failed: {error}") from None
    hosts: List[str] = []
    for line in output.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host, _, slots = line.partition(":")
        try:
            count_on_host = int(slots) if slots.strip() else 1
        except ValueError:
            count_on_host = -1
        if not host.strip() or count_on_host < 1:
            raise ElasticJobError(f"the host discovery script {script!r} printed {line!r}: "
                                  "expected host or host:slots (slots a positive number)")
        hosts += [host.strip()] * count_on_host
    if not hosts:
        raise ElasticJobError(f"the host discovery script {script!r} printed no hosts")
    return [hosts[i % len(hosts)] for i in range(count)]


def _hosts_for(script: str, count: int, survivors: Any) -> List[str]:
    """Where ``count`` replacements go: the host discovery script's hosts, or [] (MPI's
    choice). Rank 0 runs the script; every survivor gets its hosts, or raises its error
    (none is left waiting in the spawn)."""
    if not script:
        return []
    answer = None
    if survivors.Get_rank() == 0:
        try:
            answer = {"hosts": _discovered_hosts(script, count), "problem": ""}
        except ElasticJobError as error:
            answer = {"hosts": [], "problem": str(error)}
        answer = json.dumps(answer)
    answer = json.loads(survivors.bcast(answer, root=0))
    if answer["problem"]:
        raise ElasticJobError(answer["problem"])
    return answer["hosts"]


def recover(min_np: Optional[int] = None, max_np: Optional[int] = None,
            detected_at: Optional[float] = None) -> Any:
    """Rebuilds the job after a failure; collective over every survivor. Returns the new comm.

    Stops the runtime (without waiting on peers), revokes and shrinks the
    communicator, checks ``min_np`` (ElasticJobError on every survivor when
    fewer remain), spawns replacements up to ``max_np`` and merges them in,
    survivors first, then starts tfdist over the result. ``min_np`` and
    ``max_np`` default to the launcher's --min-np and --max-np.
    """
    from mpi4py import MPI

    info = LaunchInfo.from_environment()
    min_np = info.min_np if min_np is None else min_np
    max_np = info.max_np if max_np is None else max_np
    phases: Dict[str, float] = {"detected_at": time.time() if detected_at is None
                                else detected_at}
    start = time.perf_counter()

    # Every set's runtime stops (their communicators are revoked: nothing waits
    # on peers); non-global process sets end with the old membership.
    process_sets.shutdown()
    phases["stop_runtime"] = time.perf_counter() - start

    mark = time.perf_counter()
    old = current_communicator()
    old.Set_errhandler(MPI.ERRORS_RETURN)
    try:
        old.Revoke()
    except MPI.Exception:
        pass  # revoked already (by a peer): the same outcome
    survivors = old.Shrink()
    survivors.Set_errhandler(MPI.ERRORS_RETURN)
    # Every survivor has shrunk (a fault-tolerant agreement): none goes on
    # to spawn with a partner still in the old communicator.
    survivors.Agree(1)
    phases["shrink"] = time.perf_counter() - mark

    size = survivors.Get_size()
    if min_np is not None and size < min_np:
        raise ElasticJobError(
            f"tfdist.elastic: only {size} rank(s) survived, fewer than --min-np {min_np}; the "
            f"job cannot continue (this was rank {old.Get_rank()} before the failure). Restart "
            "it, from a checkpoint if one was saved, with enough hosts.")

    mark = time.perf_counter()
    missing = max(0, (max_np or 0) - size)
    # Warm spares first: rank 0 orders up to `missing` of its spares to join
    # and every survivor accepts them in turn (no process starts here).
    ports = spares.claim_spares(survivors.Get_rank(), missing)
    merged = spares.accept_more(survivors, ports)
    phases["join_spares"] = time.perf_counter() - mark
    phases["spares_joined"] = merged.Get_size() - size

    mark = time.perf_counter()
    merged = _spawn_missing(merged, missing - (merged.Get_size() - size), info)
    phases["spawn"] = time.perf_counter() - mark

    mark = time.perf_counter()
    process_sets.init(merged)
    phases["rebuild_runtime"] = time.perf_counter() - mark
    _current.last_phases = phases
    # No top-up of the warm spares after a failure: a spare spawned by rank 0
    # after one was seen to block for good in its first send to rank 0
    # (inside Open MPI's PMIx_Get), holding up the job's end (docs/elastic.md).
    return merged


def _spawn_missing(comm: Any, missing: int, info: LaunchInfo) -> Any:
    """Collective over ``comm``: spawns rank 0's count of replacements (``missing`` there)
    and merges them in after ``comm``'s ranks. Returns the communicator to run over."""
    from mpi4py import MPI

    missing = comm.bcast(missing, root=0)
    if missing <= 0:
        return comm
    hosts = _hosts_for(info.host_discovery_script, missing, comm)
    spawn_info = MPI.Info.Create()
    spawn_info.Set("PMIX_ENVAR", _REPLACEMENT_ENVIRONMENT)
    spawn_info.Set("wdir", os.getcwd())
    if hosts:
        spawn_info.Set("host", ",".join(hosts))
    try:
        intercomm = comm.Spawn(sys.executable, args=_spawn_command(), maxprocs=missing,
                               info=spawn_info, root=0)
    except MPI.Exception as error:
        where = (f"on {', '.join(hosts)} (from the host discovery script: each must be a "
                 "host of mpirun's allocation, as mpirun names it)" if hosts
                 else "where mpirun chose")
        raise ElasticJobError(
            f"tfdist.elastic: could not start {missing} replacement rank(s) {where}: MPI "
            f"said {error.Get_error_string()}. The job cannot grow back; restart it, from a "
            "checkpoint if one was saved.") from None
    finally:
        spawn_info.Free()
    intercomm.Set_errhandler(MPI.ERRORS_RETURN)
    merged = intercomm.Merge(high=False)  # the job's ranks first
    merged.Set_errhandler(MPI.ERRORS_RETURN)
    return merged


def join_as_spare(merged: Any) -> Any:
    """In a warm spare just merged in: takes part in the rest of the recovery's growth
    (later spares, replacements) as the survivors do; returns the final communicator."""
    info = LaunchInfo.from_environment()
    merged = spares.accept_more(merged, [])
    return _spawn_missing(merged, 0, info)


def schedule_spares() -> None:
    """Rank 0 starts its warm spares at the next ``State.commit()`` (after the job's first
    step: off the start's critical path). run() calls it when it starts."""
    spares.schedule(_keep_spares_now)


def _keep_spares_now() -> None:
    comm = current_communicator()
    info = LaunchInfo.from_environment()

    def hosts() -> List[str]:
        # Rank 0 alone asks the host discovery script (no other rank takes part).
        return (_discovered_hosts(info.host_discovery_script, 1)
                if info.host_discovery_script else [])

    spares.keep_spares(comm.Get_rank(), comm.Get_size(), _spawn_command, hosts)
