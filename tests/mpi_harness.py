"""Runs a worker script on N processes under mpirun, with a timeout, for the pytest tests.

A worker asserts its results against numpy. If anything fails on any rank
outside a registered check, ``worker_main`` prints the traceback and aborts the
whole MPI job, so that no rank is left waiting in a collective; the timeout
here is the last line of defence against a hang. Either way the test fails
and shows every rank's output.

A worker with many checks registers them by name in a ``Checks`` list
(``@CHECKS.check("name")``); a failing check is reported and the job goes on
to the next one, and pytest makes one test item per check from that list
(``worker_checks``, ``run_job``, ``assert_check_passed``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tfdistrun import _stop as stop_job, find_mpirun

ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).resolve().parent / "workers"
# The tfdist package the tests check, found before anything reorders sys.path
# (importing the benchmarks package moves the source tree to its end).
TFDIST_PACKAGE = Path(importlib.util.find_spec("tfdist").submodule_search_locations[0])


def shared_memory_expected() -> bool:
    """Whether this worker's job has the "shm" allreduce algorithm: its ranks share this
    machine (every test job runs on one) unless TFDIST_VIRTUAL_HOSTS splits them, and the
    settings leave it on (TFDIST_SHARED_MEMORY, off under MPI's fault tolerance)."""
    from tfdist.config import RuntimeSettings
    settings = RuntimeSettings.from_environment()
    return settings.shared_memory and not settings.virtual_hosts


def host_shared_memory_expected() -> bool:
    """Whether this worker's job has the "hierarchical_shm" allreduce algorithm: on one
    host, as the flat "shm" (shared_memory_expected); across virtual hosts, where each
    has two ranks or more and the settings leave shared memory on."""
    from mpi4py import MPI
    from tfdist.config import RuntimeSettings
    settings = RuntimeSettings.from_environment()
    if not settings.virtual_hosts:
        return shared_memory_expected()
    return (settings.shared_memory and settings.virtual_hosts > 1
            and MPI.COMM_WORLD.size // settings.virtual_hosts > 1)


def mpi_environment(extra: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # Workers import the installed tfdist; tests/ only for this harness.
        "PYTHONPATH": os.pathsep.join(filter(None, [env.get("PYTHONPATH"),
                                                    str(Path(__file__).resolve().parent)])),
        # Several processes on two cores: keep TensorFlow's thread pools small.
        "TF_NUM_INTRAOP_THREADS": env.get("TF_NUM_INTRAOP_THREADS", "1"),
        "TF_NUM_INTEROP_THREADS": env.get("TF_NUM_INTEROP_THREADS", "1"),
        # A rank ended by SIGABRT prints every thread's Python stack: a job
        # past its timeout is ended that way first (dump_python_stacks).
        "PYTHONFAULTHANDLER": "1",
    })
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)  # unset in the job
        else:
            env[name] = value
    return env


@dataclass
class Job:
    """One finished (or timed-out) mpirun of a worker: what it printed and how it ended."""
    script: str
    np: int
    output: str
    returncode: Optional[int]  # None when the job ran past its timeout
    timeout: float
    #: Where its check lines carry the worker's name (a shared job): "<worker>/".
    check_prefix: str = ""
    #: The directory made for it, where its arguments named one (a shared job's "{dir}").
    directory: Optional[Path] = None

    def assert_ended(self, expect_failure: bool = False) -> str:
        """Fails as run_workers does if the job hung, failed, or (expect_failure) succeeded."""
        if self.returncode is None:
            raise AssertionError(f"{self.script} on {self.np} ranks hung past {self.timeout} s:\n"
                                 f"{self.output[-6000:]}")
        if expect_failure:
            assert self.returncode != 0, (
                f"{self.script} on {self.np} ranks should have failed:\n{self.output[-6000:]}")
        else:
            assert self.returncode == 0, (f"{self.script} on {self.np} ranks failed "
                                          f"(exit {self.returncode}):\n{self.output[-8000:]}")
        return self.output


def run_job(script: str, np: int, args: Sequence[str] = (), timeout: float = 240,
            env: Optional[Dict[str, str]] = None) -> Job:
    """Runs tests/workers/<script> on ``np`` ranks under a timeout; returns the Job, whatever
    its outcome (``Job.assert_ended`` judges it). ``script`` may also be a path relative to
    the repository root (an example)."""
    path = WORKERS / script if (WORKERS / script).exists() else ROOT / script
    command = [find_mpirun(), "-np", str(np), "--oversubscribe", "--bind-to", "none",
               sys.executable, str(path), *args]
    started = time.monotonic()
    # Its own process group, so that a timeout ends the ranks too: killing mpirun alone
    # would leave them running (and using the cores) after the test has failed.
    process = subprocess.Popen(command, env=mpi_environment(env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=str(ROOT),
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        output, _ = end_process_group(process)
        record_launch(script, np, args, time.monotonic() - started)
        return Job(script, np, output, None, timeout)
    record_launch(script, np, args, time.monotonic() - started)
    return Job(script, np, output, process.returncode, timeout)


def end_process_group(process: "subprocess.Popen[str]") -> Tuple[str, str]:
    """Ends a job that ran past its timeout, ranks included, and returns what it had
    printed (stdout, stderr; "" for a stream not piped apart): first every rank's
    Python stacks (dump_python_stacks), so that the output shows where it hung; then
    tfdistrun's own stop (SIGTERM to the group, then SIGKILL)."""
    dump_python_stacks(process.pid)
    stop_job(process)
    stdout, stderr = process.communicate()
    return stdout or "", stderr or ""


def _descendants(root: int) -> List[Tuple[int, str]]:
    """(pid, command line) of every live descendant of process ``root``."""
    children: Dict[int, List[int]] = {}
    commands: Dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                # The command name may hold spaces: the parent pid follows its ')'.
                parent = int(stat.read().rpartition(")")[2].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                commands[int(entry)] = cmdline.read().replace(b"\0", b" ").decode(
                    errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found: List[Tuple[int, str]] = []
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append((pid, commands.get(pid, "")))
        pending += children.get(pid, [])
    return found


def dump_python_stacks(root: int, settle_seconds: float = 3.0) -> None:
    """Sends SIGABRT to every Python process under ``root`` but the launchers (mpirun
    forwards their output while it lives): with PYTHONFAULTHANDLER set (mpi_environment)
    each prints all its threads' Python stacks as it ends."""
    ranks = [pid for pid, command in _descendants(root)
             if "python" in command.split(" ")[0] and "tfdistrun" not in command]
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGABRT)
        except ProcessLookupError:
            pass
    if ranks:
        time.sleep(settle_seconds)


def run_command(command: Sequence[str], env: Optional[Dict[str, str]] = None,
                timeout: float = 240, cwd: Optional[Path] = None
                ) -> "subprocess.CompletedProcess[str]":
    """Runs ``command`` (mpirun, tfdistrun, a benchmark) with mpi_environment(env) in its
    own process group; returns its CompletedProcess (stdout and stderr apart).

    Past ``timeout`` it ends the whole group (the ranks too: killing the launcher
    alone would leave them using the cores for the rest of the run), after the
    ranks' Python stacks are printed, and fails the calling test with both tails.
    """
    process = subprocess.Popen(list(command), env=mpi_environment(env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=str(cwd or ROOT),
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stdout, stderr = end_process_group(process)
        raise AssertionError(f"{' '.join(map(str, command[:6]))} ... hung past {timeout} s; "
                             f"its stdout:\n{stdout[-4000:]}\nits stderr (the ranks' "
                             f"stacks at the end):\n{stderr[-12000:]}") from None
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


@dataclass
class Launch:
    """One mpirun the tests started, for the run's cost summary (conftest.py)."""
    script: str
    np: int
    args: str
    seconds: float


#: Every launch of this pytest session, in order. CI's time goes mostly to starting
#: ranks (each imports TensorFlow), so the summary counts rank-launches as well.
LAUNCHES: List[Launch] = []


def record_launch(script: str, np: int, args: Sequence[str], seconds: float) -> None:
    """Notes a finished mpirun (also one that timed out) for the cost summary."""
    LAUNCHES.append(Launch(Path(script).name, np, " ".join(args)[:60], seconds))


def launch_summary(slowest: int = 15) -> List[str]:
    """Lines that say how many launches and rank-launches ran, their wall time, and the
    slowest ones; empty when none ran."""
    if not LAUNCHES:
        return []
    total = sum(launch.seconds for launch in LAUNCHES)
    lines = [f"{len(LAUNCHES)} mpirun launches, {sum(l.np for l in LAUNCHES)} ranks started, "
             f"{total:.0f} s in all; the slowest:"]
    for launch in sorted(LAUNCHES, key=lambda l: -l.seconds)[:slowest]:
        lines.append(f"  {launch.seconds:7.1f} s  np={launch.np}  {launch.script} {launch.args}")
    return lines


def run_workers(script: str, np: int, args: Sequence[str] = (), timeout: float = 240,
                env: Optional[Dict[str, str]] = None,
                expect_failure: bool = False) -> str:
    """Runs tests/workers/<script> on ``np`` ranks; returns the combined output.

    Fails the calling test if the job fails (or, with expect_failure, if it
    succeeds) or runs past ``timeout`` seconds. ``script`` may also be a path
    relative to the repository root (an example).
    """
    return run_job(script, np, args, timeout, env).assert_ended(expect_failure)


# ------------------------------------------------------------------ named checks

class Checks:
    """A worker's checks, by name, in the order they run; registering runs nothing.

    ``@CHECKS.check("name")`` registers a check; ``@CHECKS.setup`` a step around
    the checks (init, shutdown, settings for the next lifetime), which is not a
    test of its own. ``run(*args)`` calls every step with ``args`` in order. A
    check that raises prints ``CHECK <name> FAILED (rank r)`` and its traceback,
    and the job goes on; after each check the ranks agree (one allreduce of a
    failure flag) so that they start the next step together. A failing setup
    step raises, and ``worker_main`` aborts the job. If a check leaves a rank
    stuck in a collective, the test's timeout ends the job.
    """

    #: Put before every check's name in the lines ``run`` prints; a shared job sets it to
    #: the worker's name while that worker runs.
    prefix = ""

    def __init__(self) -> None:
        self._steps: List[Tuple[Optional[str], Callable[..., None]]] = []

    def check(self, name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
        """Registers the decorated function as the check ``name`` (unique in this list)."""
        if name in self.names():
            raise ValueError(f"check {name!r} is registered twice")

        def register(function: Callable[..., None]) -> Callable[..., None]:
            self._steps.append((name, function))
            return function
        return register

    def setup(self, function: Callable[..., None]) -> Callable[..., None]:
        """Registers the decorated function as a step that is not a check (a failure aborts)."""
        self._steps.append((None, function))
        return function

    def names(self) -> List[str]:
        """The checks' names, in the order they run."""
        return [name for name, _ in self._steps if name is not None]

    def run(self, *args: Any, only: Optional[Sequence[str]] = None) -> None:
        """Runs every step in order with ``args``, or the setup steps and then the checks
        named in ``only``, in that order (only for a list whose setup steps all come first).

        Exits with status 1 on every rank, naming them, if any check failed on any rank.
        """
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        steps = self._steps
        if only is not None:
            unknown = [name for name in only if name not in self.names()]
            if unknown:
                raise ValueError(f"unknown checks {unknown}; known: {self.names()}")
            first_check = next(i for i, (name, _) in enumerate(steps) if name is not None)
            if any(name is None for name, _ in steps[first_check:]):
                raise ValueError("a list with setup steps between its checks runs whole")
            by_name = dict(steps)
            steps = steps[:first_check] + [(name, by_name[name]) for name in only]
        failed = []
        for name, function in steps:
            if name is None:
                function(*args)
                continue
            try:
                function(*args)
            except Exception:  # noqa: BLE001  (reported; the next check still runs)
                print(f"CHECK {Checks.prefix}{name} FAILED (rank {comm.rank})\n"
                      f"{traceback.format_exc()}",
                      end="", flush=True)
                failing = 1
            else:
                print(f"CHECK {Checks.prefix}{name} ok (rank {comm.rank})", flush=True)
                failing = 0
            if comm.allreduce(failing, op=MPI.SUM):
                failed.append(name)
        if failed:
            sys.stdout.flush()
            raise SystemExit(f"rank {comm.rank}: checks failed on some rank: {failed}")


def worker_checks(script: str) -> Checks:
    """The ``CHECKS`` list of tests/workers/<script>, imported without running the worker."""
    if str(WORKERS) not in sys.path:
        sys.path.insert(0, str(WORKERS))  # the workers import their helpers as siblings
    module = importlib.import_module(Path(script).stem)
    checks = getattr(module, "CHECKS", None)
    assert isinstance(checks, Checks), f"{script} has no CHECKS = Checks() list"
    return checks


def check_names(script: str) -> List[str]:
    """The names of tests/workers/<script>'s checks, for pytest's parametrize.

    If the worker cannot be imported here, the one name is ``import``: that item
    fails with the job's output (its ranks import the same module), and the rest
    of the suite still runs.
    """
    try:
        return worker_checks(script).names()
    except Exception:  # noqa: BLE001  (a collection error would stop the whole run)
        traceback.print_exc()
        return ["import"]


def check_output(output: str, name: str, rank: int) -> str:
    """What rank ``rank`` printed for the failed check ``name``: its line and traceback."""
    marker = f"CHECK {name} FAILED (rank {rank})\n"
    start = output.find(marker)
    if start < 0:
        return ""
    # The traceback ends where the next CHECK line or the end of the output begins.
    following = re.search(r"^CHECK .* \(rank \d+\)$", output[start + len(marker):], re.M)
    end = start + len(marker) + (following.start() if following else 6000)
    return output[start:end]


def assert_check_passed(job: Job, name: str) -> None:
    """Passes when every rank of ``job`` printed ``CHECK <name> ok (rank r)``; fails with
    that check's output otherwise (or the job's end, if it never got there)."""
    label = job.check_prefix + name
    missing = [rank for rank in range(job.np)
               if f"CHECK {label} ok (rank {rank})" not in job.output]
    if not missing:
        return
    reports = [check_output(job.output, label, rank) for rank in missing]
    if any(reports):
        raise AssertionError(f"check {name!r} of {job.script} on {job.np} ranks failed on "
                             f"ranks {missing}:\n" + "\n".join(filter(None, reports)))
    ending = ("hung past its timeout" if job.returncode is None
              else f"exited with status {job.returncode}")
    raise AssertionError(f"check {name!r} of {job.script} on {job.np} ranks did not finish on "
                         f"ranks {missing}: the job {ending} first:\n{job.output[-6000:]}")


# ------------------------------------------------------------------ shared jobs

_SHARED_RUNS: Dict[int, Tuple[Job, Dict[str, Path]]] = {}


def shared_job(script: str, np: int) -> Job:
    """The part of this size's shared job (tests/shared_jobs.py) that ran ``script``.

    The first call at a size runs every member of it, one after another, in one mpirun;
    later calls read the same output. The Job's check lines carry the worker's name
    (``check_prefix``, which ``assert_check_passed`` reads), and its return code is 0 when
    every rank ended the member well, the job's own when it did not, None when the job
    hung before the member ended.
    """
    import tempfile
    from shared_jobs import SHARED_JOBS
    members = SHARED_JOBS.get(np, [])
    if not any(member.script == script for member in members):
        raise AssertionError(f"{script} has no place in the shared job at np={np} "
                             "(tests/shared_jobs.py)")
    if np not in _SHARED_RUNS:
        directories: Dict[str, Path] = {}
        specification = []
        for member in members:
            directory = Path(tempfile.mkdtemp(prefix=f"{Path(member.script).stem}-np{np}-"))
            directories[member.script] = directory
            fill = lambda text: text.replace("{dir}", str(directory))  # noqa: E731
            specification.append({"script": member.script,
                                  "args": [fill(arg) for arg in member.args],
                                  "env": {key: fill(value) for key, value in member.env}})
        job = run_job("shared_job.py", np, [json.dumps(specification)],
                      timeout=sum(member.timeout for member in members))
        LAUNCHES[-1].args = " ".join(Path(member.script).stem for member in members)[:60]
        _SHARED_RUNS[np] = (job, directories)
    job, directories = _SHARED_RUNS[np]
    stem = Path(script).stem
    ended = [f"SHARED {stem} ok (rank {rank})" in job.output for rank in range(np)]
    failed = any(f"SHARED {stem} FAILED (rank {rank})" in job.output for rank in range(np))
    if all(ended):
        returncode: Optional[int] = 0
    elif failed or job.returncode is not None:
        returncode = job.returncode or 1
    else:
        returncode = None
    return Job(script, np, job.output, returncode, job.timeout, check_prefix=f"{stem}/",
               directory=directories[script])


def expect_error(error_type, fn, *fragments):
    """Runs fn, which must raise error_type with every fragment in its message."""
    try:
        fn()
    except error_type as error:
        message = error.message if hasattr(error, "message") else str(error)
        for fragment in fragments:
            assert fragment in message, f"{fragment!r} not in error message: {message}"
        return message
    raise AssertionError(f"{fn} should have raised {error_type.__name__}")


def worker_main(body: Callable[[], None]) -> None:
    """Runs a worker's checks; on any failure, reports it and aborts every rank."""
    try:
        body()
    except SystemExit:
        raise  # a deliberate exit code (a preempted worker's) is its answer, not a failure
    except BaseException:  # noqa: BLE001  (any failure must reach every rank)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)
