"""Elastic recovery: kill -9 of one of 4 ranks; time to the survivors' next step, and to 4 ranks again.

    python -m benchmarks.elastic [--np 4] [--modes continue,regrow,regrow_spare]
        [--json docs/results/elastic-np4.json] [--plot]

Runs two jobs with ``tfdistrun --elastic`` (this module is also the
ranks' program). In each, the ranks train a small model (an allreduce of a
1 MiB gradient per step, the state committed every step) and the last rank
kills itself with SIGKILL in the middle of a step, noting the time first.

- ``continue``: no replacement (TFDIST_MAX_NP = np - 1): the time from the
  kill to the survivors' next completed step, at np - 1 ranks.
- ``regrow``: --max-np = np, no spares: a replacement is spawned (it starts
  Python and imports TensorFlow) and joins; the time from the kill to the
  first step completed at np ranks again.
- ``regrow_spare``: --max-np = np, ``--spares 1``: rank 0 keeps a warm spare
  (started at the first commit; the ranks wait before the kill step until it
  waits in its init(), imports done), which joins instead.

For each, rank 0's recovery phases: detect (kill to the error on rank 0),
stop_runtime, shrink, join_spares (ordering warm spares in and merging
them), spawn (spawn and merge of replacements, their start-up included),
rebuild_runtime (tfdist.init over the new communicator) and sync_state
(restore and sync of the committed state).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from benchmarks import _results

GRADIENT_FLOATS = 256 * 1024  # 1 MiB of float32
KILL_AT_STEP = 20
STEPS_AFTER = 5
PHASES = ("detect", "stop_runtime", "shrink", "join_spares", "spawn", "rebuild_runtime",
          "sync_state")
MODES = ("continue", "regrow", "regrow_spare")
#: How long the ranks wait, before the kill step, for the warm spare to be ready.
SPARE_WARMUP_TIMEOUT = 240.0


def _rank_main(mode: str, out: str) -> None:
    """One rank of a job: train, lose the last rank at KILL_AT_STEP, report from rank 0."""
    import numpy as np
    import tensorflow as tf

    import tfdist
    from tfdist.elastic import membership, spares

    tfdist.init()
    first_size = tfdist.size()  # a replacement joins a job back at full size
    weights = tf.Variable(tf.zeros([GRADIENT_FLOATS]))
    state = tfdist.elastic.TensorFlowState([weights], step=0)
    victim = first_size - 1
    kill_file = Path(out) / "killed_at"
    completed: List[Any] = []  # (time, size) of each step after the kill

    def wait_for_warm_spare() -> None:
        # Every rank waits (rank 0 says when) until rank 0's spare waits in its init().
        deadline = time.monotonic() + SPARE_WARMUP_TIMEOUT
        while not tfdist.broadcast_object(spares.warm_spares() > 0, root_rank=0):
            if time.monotonic() > deadline:
                raise AssertionError("the warm spare was not ready within "
                                     f"{SPARE_WARMUP_TIMEOUT:g} s")
            time.sleep(0.2)

    @tfdist.elastic.run
    def train(state) -> None:
        while state.step < KILL_AT_STEP + STEPS_AFTER:
            if (mode == "regrow_spare" and state.step == KILL_AT_STEP
                    and not membership.joined_as_replacement()
                    and not membership.last_recovery_phases()):  # once, before the kill
                wait_for_warm_spare()
            if (state.step == KILL_AT_STEP and tfdist.rank() == victim
                    and not membership.joined_as_replacement()):
                time.sleep(0.3)  # the others are in this step's allreduce by now
                kill_file.write_text(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            gradient = tf.fill([GRADIENT_FLOATS], float(tfdist.rank() + 1))
            total = tfdist.allreduce(gradient, op=tfdist.Sum, name="bench.elastic.gradient")
            size = tfdist.size()
            expected = size * (size + 1) / 2
            if not np.all(total.numpy()[:8] == expected):
                raise AssertionError(f"allreduce gave {total.numpy()[:8]}, expected {expected}")
            weights.assign_add(total * 1e-6)
            state.step += 1
            state.commit()
            if state.step > KILL_AT_STEP:
                completed.append((time.time(), size))

    train(state)
    if tfdist.rank() == 0:
        killed_at = float(kill_file.read_text())
        phases = membership.last_recovery_phases()
        first = completed[0]
        at_full = next((t for t, size in completed if size == first_size), None)
        result = {
            "mode": mode,
            "ranks_before": first_size,
            "ranks_after": completed[-1][1],
            "kill_to_next_step_s": first[0] - killed_at,
            "next_step_ranks": first[1],
            "kill_to_full_size_s": None if at_full is None else at_full - killed_at,
            "spares_joined": phases.get("spares_joined", 0),
            "phases_s": {"detect": phases["detected_at"] - killed_at,
                         **{name: phases.get(name) for name in PHASES[1:]}},
        }
        (Path(out) / f"{mode}.json").write_text(json.dumps(result))
    tfdist.shutdown()


def _job(mode: str, np_: int, out: str, timeout: float) -> Dict[str, Any]:
    """Runs one job under tfdistrun --elastic; returns rank 0's result."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if mode == "continue":
        # --max-np may not be below -np; the settings tfdistrun --elastic gives, with
        # no replacement (tfdistrun forwards every TFDIST_* variable).
        env.update(TFDIST_ELASTIC="1", TFDIST_MAX_NP=str(np_ - 1))
        options = ["-np", str(np_), "--mpi-args", "--with-ft ulfm"]
    else:
        options = ["--elastic", "-np", str(np_),
                   "--spares", "1" if mode == "regrow_spare" else "0"]
    command = [sys.executable, str(root / "tfdistrun.py"), *options, "--timeout", str(timeout),
               sys.executable, "-m", "benchmarks.elastic", "--rank", mode, out]
    done = subprocess.run(command, env=env, cwd=str(root), capture_output=True, text=True)
    path = Path(out) / f"{mode}.json"
    if not path.exists():
        raise SystemExit(f"the {mode} job gave no result (exit {done.returncode}):\n"
                         f"{(done.stdout + done.stderr)[-4000:]}")
    return json.loads(path.read_text())


def summary(document: Dict[str, Any]) -> str:
    """The markdown table of both jobs."""
    def cell(value: Optional[float]) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = ["| job | ranks | kill -> next step (s) | at ranks | kill -> back at full size (s) | "
             + " | ".join(f"{p} (s)" for p in PHASES) + " |",
             "|---" * (5 + len(PHASES)) + "|"]
    for run in document["runs"]:
        lines.append(f"| {run['mode']} | {run['ranks_before']} -> {run['ranks_after']} | "
                     f"{cell(run['kill_to_next_step_s'])} | {run['next_step_ranks']} | "
                     f"{cell(run['kill_to_full_size_s'])} | "
                     + " | ".join(cell(run["phases_s"].get(p)) for p in PHASES) + " |")
    return "\n".join(lines) + "\n"


_PHASE_COLOURS = {"detect": "tab:red", "stop_runtime": "tab:purple", "shrink": "tab:brown",
                  "join_spares": "tab:olive",
                  "spawn": "tab:orange", "rebuild_runtime": "tab:blue",
                  "sync_state": "tab:green"}


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Recovery timelines: for each job, rank 0's phases laid end to end from the kill, and
    when the survivors completed their next step (and were back at full size)."""
    runs = [(document, run) for document in documents for run in document["runs"]]
    figure, axes_list = plt.subplots(len(runs), 1, figsize=(9, 1.6 * len(runs) + 0.8),
                                     squeeze=False)
    for axes, (document, run) in zip((a for row in axes_list for a in row), runs):
        start = 0.0
        for phase in PHASES:
            length = run["phases_s"].get(phase) or 0.0
            axes.broken_barh([(start, length)], (-0.3, 0.6), facecolors=_PHASE_COLOURS[phase],
                             label=f"{phase} {length:.3f} s")
            start += length
        next_step = run["kill_to_next_step_s"]
        axes.axvline(next_step, color="black", linestyle="--",
                     label=f"next step done at {run['next_step_ranks']} ranks: {next_step:.3f} s")
        axes.set_xlim(0, max(start, next_step) * 1.05)
        axes.set_yticks([0], [f"{run['mode']}\n{run['ranks_before']} -> {run['ranks_after']} "
                              f"ranks"])
        axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes.set_xlabel("seconds from the kill -9 (rank 0's phases, end to end)", fontsize=8)
    ranks = runs[0][1]["ranks_before"] if runs else "?"
    figure.suptitle(f"elastic recovery timelines: kill -9 of 1 of {ranks} ranks")
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank"]:  # the ranks' program (also what a replacement runs)
        _rank_main(argv[1], argv[2])
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=4, help="ranks at the start (default 4)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds each job may take (default 300)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated jobs to run (default: {','.join(MODES)})")
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {', '.join(sorted(unknown))}; expected among "
                     f"{', '.join(MODES)}")
    _results.check_arguments(parser, args)
    if args.np < 2:
        parser.error(f"--np must be at least 2 (one rank is killed), got {args.np}")
    runs = []
    parser_modes = args.modes.split(",")
    for mode in parser_modes:
        with tempfile.TemporaryDirectory(prefix="tfdist-elastic-bench-") as out:
            runs.append(_job(mode, args.np, out, args.timeout))
    _results.publish(args, "elastic", {"runs": runs}, argv, ranks=args.np)
    return 0


if __name__ == "__main__":
    sys.exit(main())
