"""Warm spares: processes started before a failure that elastic recovery merges in.

Rank 0 of an elastic job keeps ``LaunchInfo.spares_wanted`` spare
processes (TFDIST_ELASTIC_SPARES, tfdistrun --spares, when --max-np allows
regrowth; default 0). Each is spawned by rank 0 alone
(``MPI.COMM_SELF.Spawn``, in a background thread: no other rank takes part
and training goes on), runs ``tfdist/elastic/warm_spare.py``, which
initialises MPI, imports TensorFlow and runs the job's own program up to its
``tfdist.init()``, and waits there: a receive from rank 0 on its parent
intercommunicator, tested every POLL_SECONDS with a sleep in between (MPI's
blocking receive would spin a core). A spare is in no communicator of the
job: it does not count in ``size()`` and does no training.

On a failure the survivors revoke and shrink as before; then, if the process
that holds the spares is still rank 0, it sends a spare a port name (MPI
ports: ``Open_port``), the spare answers, connects, and the survivors
``Accept`` it and ``Merge`` (survivors first), one spare at a time; no
process starts on the critical path. Spares are not replaced after a
failure (a spare spawned after one was seen to block in Open MPI), so K
spares cover the job's first K lost ranks. At exit rank 0 tells its spares
to end; they exit with code 0.
docs/elastic.md ("Warm spares") has the whole sequence and its limits.

Only rank 0 talks to spares, so no other rank's failure touches them. Why
not a spawn from every rank and a shrink of the intercommunicator: Open MPI
5.0's ``MPIX_Comm_shrink`` of an intercommunicator fails (MPI_ERR_INTERN),
its ``MPI_Intercomm_create`` refuses an intercommunicator as the bridge, and
a spare whose parent group holds a dead process crashes in ``MPI_Finalize``
(its disconnect sends to the dead process). The spares of a rank 0 that dies
are orphaned: they see it (its pid, on the same host) and exit; the survivors
start replacements as they did without spares.
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from tfdist.config import LaunchInfo

#: Rank 0's orders to a spare (``("join", port)`` or ``("exit", None)``), the
#: spare's answer to a join, and the hello a spare sends once MPI is up.
ORDER_TAG, ANSWER_TAG, HELLO_TAG, WAITING_TAG, BYE_TAG = 7301, 7302, 7303, 7304, 7305
#: A spare tests for an order this often (and sleeps in between).
POLL_SECONDS = 0.025
#: How long rank 0 waits for a spare to answer a join order: a spare spawned
#: just before the failure may still be importing TensorFlow.
ANSWER_TIMEOUT_SECONDS = 120.0
#: How long a recovery waits for a spawn in progress (MPI_Comm_spawn and the
#: spare's hello; about a second when it works) before it gives up on spares
#: and starts replacements: a spawn that never returns must not hold it up.
SPAWN_TIMEOUT_SECONDS = 60.0
#: Room for an order (a pickled port name).
ORDER_BYTES = 1 << 14
#: The program a spare runs: MPI first (rank 0's spawn returns once the spare's
#: MPI_Init has), then the module (importing tfdist.elastic imports TensorFlow).
SPARE_MODULE = "tfdist.elastic.warm_spare"
#: Where this process found tfdist. ``python -c`` puts the working directory
#: first on sys.path, so a spare started in a tfdist source tree would import
#: that tree (maybe unbuilt, maybe another version) instead of the tfdist
#: rank 0 runs; the spare puts this directory first.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
#: The ``python -c`` code a spare starts with: PACKAGE_ROOT first on sys.path,
#: MPI up, then SPARE_MODULE.
_BOOT = (f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); "
         "from mpi4py import MPI; import runpy; "
         f"runpy.run_module({SPARE_MODULE!r}, run_name='__main__')")


def process_alive(host: str, pid: int) -> Optional[bool]:
    """Whether process ``pid`` on ``host`` exists; None when ``host`` is another machine."""
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a process that has ended but is not yet reaped (a zombie) is gone too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def spare_arguments(parent_host: str, parent_pid: int, program: List[str]) -> List[str]:
    """sys.executable's arguments for a spare of the process ``parent_pid`` running ``program``."""
    return ["-c", _BOOT, "--parent", f"{parent_host}:{parent_pid}", "--", *program]


def parse_spare_arguments(argv: List[str]) -> Tuple[str, int, List[str]]:
    """(parent host, parent pid, the program's arguments) from a spare's argv[1:]."""
    if len(argv) < 3 or argv[0] != "--parent" or "--" not in argv:
        raise ValueError(f"{SPARE_MODULE} expects --parent HOST:PID -- PROGRAM ..., got {argv}")
    host, _, pid = argv[1].rpartition(":")
    program = argv[argv.index("--") + 1:]
    if not host or not pid.isdigit() or not program:
        raise ValueError(f"{SPARE_MODULE} expects --parent HOST:PID -- PROGRAM ..., got {argv}")
    return host, int(pid), program


class Spare:
    """Rank 0's handle on one spare: its intercommunicator, host and pid."""

    def __init__(self, inter: Any, host: str, pid: int) -> None:
        self.inter = inter
        self.host = host
        self.pid = pid
        # Completes when the spare waits in init() (its imports are done).
        self._waiting = inter.irecv(bytearray(64), source=0, tag=WAITING_TAG) \
            if inter is not None else None
        self._warm = False

    def warm(self) -> bool:
        """Whether the spare has reached its wait (imports done): a join is then at once."""
        if not self._warm and self._waiting is not None:
            try:
                self._warm = bool(self._waiting.test()[0])
            except Exception:  # noqa: BLE001  (a dead spare)
                return False
        return self._warm

    def free(self) -> None:
        """Frees the intercommunicator (local), so that MPI_Finalize does not disconnect it."""
        try:
            if self._waiting is not None and not self.warm():
                self._waiting.Cancel()
            self.inter.Free()
        except Exception:  # noqa: BLE001  (MPI finalized, or the spare is gone)
            pass


class SparePool:
    """The spares of this process (rank 0 of an elastic job)."""

    def __init__(self, wanted: int, spawn_one: Callable[[], Spare]) -> None:
        self.wanted = wanted
        self.ready: List[Spare] = []
        self._spawn_one = spawn_one
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._closing = False

    def refill(self) -> None:
        """Spawns spares up to ``wanted`` in a background thread (if one is not already)."""
        if self._closing or self._thread is not None and self._thread.is_alive():
            return
        if len(self.ready) >= self.wanted:
            return
        self._thread = threading.Thread(target=self._fill, name="tfdist-spares", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        while not self._closing and len(self.ready) < self.wanted:
            try:
                spare = self._spawn_one()
            except Exception as error:  # noqa: BLE001  (recovery falls back to spawning)
                print(f"tfdist.elastic: could not start a warm spare ({type(error).__name__}: "
                      f"{error}); recovery will start replacements instead", file=sys.stderr,
                      flush=True)
                return
            with self._lock:
                self.ready.append(spare)

    def wait_spawning(self, timeout: Optional[float] = None) -> bool:
        """Waits for a spawn in progress, at most ``timeout`` seconds (None: for good);
        whether none is in progress now. A spawn runs on COMM_SELF: no failure of
        another rank stops it, but Open MPI can leave it blocked for good."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _give_up_on_spawning(self, when: str) -> None:
        """A spawn did not end in SPAWN_TIMEOUT_SECONDS: no spare is used from now on."""
        self._closing = True
        print(f"tfdist.elastic: a warm spare was still being started after "
              f"{SPAWN_TIMEOUT_SECONDS:.0f} s {when}; going on without spares", file=sys.stderr,
              flush=True)

    def claim(self, count: int) -> List[str]:
        """Orders up to ``count`` live spares to join; returns their port names, in order.

        Each is sent a port and must answer; a spare that died (or never
        answers within ANSWER_TIMEOUT_SECONDS) is dropped. The caller then
        ``Accept``s each port in turn.
        """
        from mpi4py import MPI

        ports: List[str] = []
        if count <= 0 or self._closing:
            return ports
        if not self.wait_spawning(SPAWN_TIMEOUT_SECONDS):
            self._give_up_on_spawning("when a recovery needed it")
            return ports
        while len(ports) < count and self.ready:
            with self._lock:
                spare = self.ready.pop(0)
            port = MPI.Open_port()
            if _order_join(spare, port):
                ports.append(port)
            else:
                MPI.Close_port(port)
            spare.free()
        return ports

    def release(self) -> None:
        """At exit: tells every spare to end (exit code 0) and frees their communicators.

        Waits for each spare to reach its wait first (a spare still importing
        TensorFlow would otherwise send to this process after it has left
        MPI, and block there for good, holding up the job's end), then for its
        goodbye, so that the spare's last message to this process is sent
        while this process is still in MPI.
        """
        gave_up, self._closing = self._closing, True
        if not gave_up and not self.wait_spawning(SPAWN_TIMEOUT_SECONDS):
            self._give_up_on_spawning("at the end of the job")  # it ends with this process
        with self._lock:
            spares, self.ready = self.ready, []
        for spare in spares:
            if _wait_for(spare, spare.warm):
                try:
                    spare.inter.send(("exit", None), dest=0, tag=ORDER_TAG)
                    bye = spare.inter.irecv(bytearray(64), source=0, tag=BYE_TAG)
                    if not _wait_for(spare, lambda: bool(bye.test()[0])):
                        bye.Cancel()
                except Exception:  # noqa: BLE001  (a dead spare: nothing to tell)
                    pass
            spare.free()


def _poll_until(done: Callable[[], bool], seconds: float,
                gone: Callable[[], bool] = lambda: False, interval: float = POLL_SECONDS) -> bool:
    """Calls ``done`` every ``interval`` seconds until it is true (True), or ``gone`` is
    true or ``seconds`` have passed (False)."""
    deadline = time.monotonic() + seconds
    while not done():
        if gone() or time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def _wait_for(spare: Spare, done: Callable[[], bool], interval: float = POLL_SECONDS) -> bool:
    """Polls ``done`` until it is true (True), or the spare died or took longer than
    ANSWER_TIMEOUT_SECONDS (False)."""
    return _poll_until(done, ANSWER_TIMEOUT_SECONDS,
                       lambda: process_alive(spare.host, spare.pid) is False, interval)


def _order_join(spare: Spare, port: str) -> bool:
    """Sends ``spare`` the join order with ``port``; whether it answered (it is alive)."""
    from mpi4py import MPI

    try:
        spare.inter.send(("join", port), dest=0, tag=ORDER_TAG)
        answer = spare.inter.irecv(bytearray(64), source=0, tag=ANSWER_TAG)
        if _wait_for(spare, lambda: bool(answer.test()[0]), interval=POLL_SECONDS / 5):
            return True
        print(f"tfdist.elastic: the warm spare (pid {spare.pid} on {spare.host}) did "
              "not answer; starting a replacement instead", file=sys.stderr, flush=True)
        answer.Cancel()
        return False
    except MPI.Exception:
        return False


def spawn_one(program: List[str], hosts: Callable[[], List[str]]) -> Spare:
    """Spawns one spare from this process alone (COMM_SELF); returns once it said hello."""
    from mpi4py import MPI

    info = MPI.Info.Create()
    info.Set("PMIX_ENVAR", "TFDIST_ELASTIC_REPLACEMENT=1")
    info.Set("wdir", os.getcwd())
    where = hosts()
    if where:
        info.Set("host", where[0])
    try:
        inter = MPI.COMM_SELF.Spawn(
            sys.executable, args=spare_arguments(socket.gethostname(), os.getpid(), program),
            maxprocs=1, info=info, root=0)
    finally:
        info.Free()
    inter.Set_errhandler(MPI.ERRORS_RETURN)
    hello = inter.irecv(bytearray(ORDER_BYTES), source=0, tag=HELLO_TAG)
    received: List[Tuple[str, int]] = []

    def said_hello() -> bool:
        done, message = hello.test()
        if done:
            received.append(message)
        return bool(done)

    if not _poll_until(said_hello, SPAWN_TIMEOUT_SECONDS):
        hello.Cancel()
        raise TimeoutError(f"the spare did not say hello within {SPAWN_TIMEOUT_SECONDS:.0f} s "
                           "of its start (it ends when this process does)")
    host, pid = received[0]
    return Spare(inter, host, pid)


class _Holder:
    """This process's pool, once it is rank 0 of an elastic job with spares."""

    def __init__(self) -> None:
        self.pool: Optional[SparePool] = None
        self.pending: Optional[Callable[[], None]] = None


_holder = _Holder()


def schedule(starter: Callable[[], None]) -> None:
    """Runs ``starter`` (it tops the spares up) at the next ``after_commit()``."""
    _holder.pending = starter


def after_commit() -> None:
    """State.commit() calls it: a step has just completed, the point where starting a
    spare in the background costs the training least. Runs what ``schedule`` left."""
    starter, _holder.pending = _holder.pending, None
    if starter is None:
        return
    try:
        starter()
    except Exception as error:  # noqa: BLE001  (recovery falls back to spawning)
        print(f"tfdist.elastic: could not start warm spares ({type(error).__name__}: "
              f"{error}); recovery will start replacements instead", file=sys.stderr,
              flush=True)


def keep_spares(rank: int, size: int, program: Callable[[], List[str]],
                hosts: Callable[[], List[str]]) -> None:
    """On rank 0 of an elastic job that wants spares: spawns them in the background (or
    tops them up). Other ranks, and jobs without spares, do nothing."""
    if rank != 0:
        return
    wanted = LaunchInfo.from_environment().spares_wanted(size)
    if wanted <= 0:
        return
    if _holder.pool is None:
        command = program()
        _holder.pool = SparePool(wanted, lambda: spawn_one(command, hosts))
        atexit.register(release_spares)
    _holder.pool.refill()


def claim_spares(rank: int, count: int) -> List[str]:
    """Rank 0's ports of up to ``count`` spares ordered to join ([] elsewhere, or none held)."""
    if rank != 0 or _holder.pool is None:
        return []
    return _holder.pool.claim(count)


def warm_spares() -> int:
    """How many of this process's spares wait in init(), their imports done (0 unless it
    is rank 0 of an elastic job with spares)."""
    if _holder.pool is None:
        return 0
    with _holder.pool._lock:  # pylint: disable=protected-access
        return sum(spare.warm() for spare in _holder.pool.ready)


def release_spares() -> None:
    """Tells this process's spares to exit (at exit; atexit runs it before MPI_Finalize)."""
    if _holder.pool is not None:
        _holder.pool.release()


# ----------------------------------------------------------------------------
# The spare's side.

class SpareReleased(BaseException):
    """Raised in a spare's ``tfdist.init()`` when the job ended without needing it;
    warm_spare.py catches it and exits with code 0 (a BaseException, so that the
    program's ``except Exception`` does not hold it)."""


class _SpareState:
    """Set by warm_spare.py: this process is a spare, and whose."""

    def __init__(self) -> None:
        self.parent: Any = None
        self.parent_host = ""
        self.parent_pid = 0
        #: Set once the spare has joined the job (its watchdog then stops).
        self.joined = threading.Event()


_spare = _SpareState()


def _end_when_orphaned(parent_host: str, parent_pid: int) -> None:
    """A spare's watchdog: ends this process once its rank 0 is gone while it has not
    joined, wherever the spare then is (importing TensorFlow, or blocked in an MPI call
    to its dead parent): an orphaned spare must not outlive the job and hold up its end."""
    while not _spare.joined.wait(1.0):
        if process_alive(parent_host, parent_pid) is False:
            print(f"tfdist.elastic: warm spare (pid {os.getpid()} on {socket.gethostname()}) "
                  f"exits: its rank 0 (pid {parent_pid}) is gone", file=sys.stderr, flush=True)
            os._exit(0)


def become_spare(parent: Any, parent_host: str, parent_pid: int) -> None:
    """Marks this process as a spare of ``parent`` (warm_spare.py, once MPI is up)."""
    from mpi4py import MPI

    threading.Thread(target=_end_when_orphaned, args=(parent_host, parent_pid),
                     name="tfdist-spare-watchdog", daemon=True).start()
    parent.Set_errhandler(MPI.ERRORS_RETURN)
    parent.send((socket.gethostname(), os.getpid()), dest=0, tag=HELLO_TAG)
    _spare.parent, _spare.parent_host, _spare.parent_pid = parent, parent_host, parent_pid


def is_spare() -> bool:
    """Whether this process is a warm spare still waiting to be needed."""
    return _spare.parent is not None


def wait_until_needed() -> Any:
    """A spare's ``tfdist.init()``: waits for rank 0's order, without spinning a core.

    Returns the communicator of the survivors and this process (last) once
    it is ordered to join (membership.join_as_spare then takes part in the rest
    of the recovery); raises SpareReleased when the job ends without it, or
    its rank 0 died (the survivors then start replacements themselves).
    """
    from mpi4py import MPI

    parent = _spare.parent
    parent.send(b"waiting", dest=0, tag=WAITING_TAG)
    order = parent.irecv(bytearray(ORDER_BYTES), source=0, tag=ORDER_TAG)
    checked = time.monotonic()
    message = None
    while message is None:
        try:
            done, received = order.test()
        except MPI.Exception:
            done, received = False, None
            _leave(parent, "its rank 0 failed")
        if done:
            message = received
            break
        now = time.monotonic()
        if now - checked > 1.0:
            checked = now
            if process_alive(_spare.parent_host, _spare.parent_pid) is False:
                order.Cancel()
                _leave(parent, f"its rank 0 (pid {_spare.parent_pid}) died; the survivors "
                       "start replacements")
        time.sleep(POLL_SECONDS)
    action, port = message
    if action != "join":
        parent.send(b"bye", dest=0, tag=BYE_TAG)  # rank 0 waits for it in MPI
        _leave(parent, "the job ended")
    parent.send(b"ok", dest=0, tag=ANSWER_TAG)
    inter = MPI.COMM_SELF.Connect(port)
    inter.Set_errhandler(MPI.ERRORS_RETURN)
    parent.Free()
    _spare.parent = None
    merged = inter.Merge(high=True)
    merged.Set_errhandler(MPI.ERRORS_RETURN)
    _spare.joined.set()
    print(f"tfdist.elastic: warm spare (pid {os.getpid()} on {socket.gethostname()}) joined "
          f"as rank {merged.Get_rank()} of {merged.Get_size()}", file=sys.stderr, flush=True)
    return merged


def accept_more(comm: Any, ports: List[str]) -> Any:
    """Collective over ``comm``: merges in the spares whose ports rank 0 holds, in turn.

    Rank 0 broadcasts how many remain before each; every member (survivors
    and the spares that joined before) accepts and merges. Returns the
    communicator with all of them, survivors first.
    """
    from mpi4py import MPI

    ports = list(ports)
    while comm.bcast(len(ports), root=0) > 0:
        port = ports.pop(0) if comm.Get_rank() == 0 else None
        inter = comm.Accept(port, root=0)
        if port is not None:
            MPI.Close_port(port)
        inter.Set_errhandler(MPI.ERRORS_RETURN)
        comm = inter.Merge(high=False)
        comm.Set_errhandler(MPI.ERRORS_RETURN)
    return comm


def _leave(parent: Any, why: str) -> None:
    """Ends a spare's wait: frees its parent communicator and raises SpareReleased."""
    try:
        parent.Free()
    except Exception:  # noqa: BLE001
        pass
    _spare.parent = None
    print(f"tfdist.elastic: warm spare (pid {os.getpid()} on {socket.gethostname()}) exits: "
          f"{why}", file=sys.stderr, flush=True)
    raise SpareReleased(why)
