"""Elastic soak: jobs at np 4 with kill -9 at random moments, and a run under full CPU load.

    python -m benchmarks.elastic_soak [--runs 20] [--np 4] [--load-minutes 10]
                                      [--json docs/results/elastic-soak-np4.json]

Not for CI (minutes). This module is also the ranks' program. Each job runs
``tfdistrun --elastic`` without replacements (TFDIST_MAX_NP=1), so the
survivors carry on at np - kills ranks; the ranks train a least-squares model
whose gradient goes through one fused, grouped allreduce of four 1 MiB
tensors, commit every step and save a checkpoint every SAVE_EVERY steps.

Soak (``--runs N``): run i kills at a random moment chosen by its kind, in turn:

- ``allreduce``: a random rank, from a timer thread, a random fraction of a
  step after the step began (mostly inside the fused allreduce);
- ``save``: rank 0 (the writer) inside a random checkpoint save, after writing
  the temporary file and before the rename;
- ``commit``: a random rank inside ``State.commit()`` of a random step;
- ``two``: two kills in one run, at two random steps (an allreduce kill,
  then a commit kill of another rank).

Each job must end within ``--timeout`` (no hang). Rank 0 logs the size at
which every committed step ran; the benchmark replays the training with
numpy at those sizes and checks the final weights (and the newest
checkpoint's) against it, and that the size went down by one per kill.

Load (``--load-minutes M``): one job of more ranks than cores (cores + 2),
plus one busy process per core, trains for M minutes with a stall shutdown
time of 20 s (600 s by default, so a false eviction would show): it must
report no recovery and no eviction, and its weights must match the replay.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

FEATURES = 4 * 256 * 1024  # four 1 MiB float32 chunks, allreduced as one group
CHUNKS = 4
# A step of gradient descent on least squares over FEATURES features is stable
# below about 2 / FEATURES: the replay must not diverge, or float32 and float64
# part ways.
BATCH, LEARNING_RATE = 4, 0.5 / FEATURES
SAVE_EVERY = 5
KINDS = ("allreduce", "save", "commit", "two")


def _data(step: int, rank: int):
    """Rank ``rank``'s batch of step ``step``: (x, y), float32."""
    rng = np.random.RandomState(1000 * step + rank)
    x = rng.normal(0, 1, (BATCH, FEATURES)).astype(np.float32)
    y = (x @ np.linspace(-1, 1, FEATURES, dtype=np.float32)).astype(np.float32)
    return x, y


def replay(sizes: List[int]) -> np.ndarray:
    """The weights after len(sizes) steps, step s averaged over sizes[s] ranks (numpy)."""
    weights = np.zeros(FEATURES, np.float64)
    for step, size in enumerate(sizes):
        total = np.zeros(FEATURES, np.float64)
        for rank in range(size):
            x, y = _data(step, rank)
            total += x.T.astype(np.float64) @ (x @ weights - y) / BATCH
        weights -= LEARNING_RATE * total / size
    return weights


def _rank_main(plan_path: str, out: str) -> None:
    """One rank: train plan["steps"] steps, dying where the plan says."""
    import tensorflow as tf
    from mpi4py import MPI

    import tfdist
    import tfdist.runtime
    from tfdist.checkpoint import file_format

    plan = json.loads(Path(plan_path).read_text())
    tfdist.init()
    world = MPI.COMM_WORLD.Get_rank()
    weights = tf.Variable(tf.zeros([FEATURES]))
    state = tfdist.elastic.TensorFlowState([weights], step=0)
    sizes: Dict[int, int] = {}  # step -> ranks it ran at (rank 0's committed log)
    recoveries = []
    state.register_reset_callbacks([lambda: recoveries.append(tfdist.size())])
    checkpoints = os.path.join(out, "checkpoints")
    kills = [k for k in plan["kills"] if k["world"] == world]

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    @tfdist.elastic.run
    def train(state) -> None:
        while state.step < plan["steps"]:
            for kill in kills:
                if kill["step"] != state.step:
                    continue
                if kill["kind"] == "allreduce":
                    threading.Timer(kill["delay"], die).start()
                elif kill["kind"] == "commit":
                    tfdist.runtime.rank_state = lambda: die()
                elif kill["kind"] == "save":
                    write = file_format.write
                    file_format.write = lambda path, contents: (write(path, contents), die())
            if state.step % SAVE_EVERY == 0 and state.step > 0:
                tfdist.checkpoint.save(checkpoints, state.step, variables=[weights],
                                       blocking=True)
            rank, size = tfdist.rank(), tfdist.size()
            x, y = _data(state.step, rank)
            residual = tf.linalg.matvec(tf.constant(x), weights) - y
            gradient = tf.linalg.matvec(tf.constant(x), residual, transpose_a=True) / BATCH
            chunks = tfdist.grouped_allreduce(tf.split(gradient, CHUNKS), op=tfdist.Average)
            weights.assign_sub(LEARNING_RATE * tf.concat(chunks, 0))
            sizes[state.step] = size
            state.step += 1
            state.commit()

    train(state)
    probe = tf.Variable(tf.zeros([FEATURES]))
    restored = tfdist.checkpoint.restore(checkpoints, variables=[probe])  # collective
    if tfdist.rank() == 0:
        result = {"sizes": [sizes[s] for s in range(plan["steps"])],
                  "recoveries": recoveries, "final_size": tfdist.size(),
                  "weights": weights.numpy().tolist(),
                  "checkpoint_step": restored.step if restored else None,
                  "checkpoint": probe.numpy().tolist() if restored else None}
        (Path(out) / "result.json").write_text(json.dumps(result))
    tfdist.shutdown()


def _plan(kind: str, np_: int, steps: int, rng: random.Random) -> List[Dict[str, Any]]:
    """The kills of one run of ``kind``: world rank, step, and delay or place."""
    def allreduce_kill(step: int, exclude=()) -> Dict[str, Any]:
        world = rng.choice([r for r in range(np_) if r not in exclude])
        return {"kind": "allreduce", "world": world, "step": step,
                "delay": rng.uniform(0.0, 0.4)}
    middle = rng.randrange(2, steps - 3)
    if kind == "allreduce":
        return [allreduce_kill(middle)]
    if kind == "save":
        return [{"kind": "save", "world": 0,
                 "step": rng.choice(range(SAVE_EVERY, steps - 1, SAVE_EVERY))}]
    if kind == "commit":
        return [{"kind": "commit", "world": rng.randrange(np_), "step": middle}]
    first = allreduce_kill(rng.randrange(2, steps // 2))
    second_world = rng.choice([r for r in range(np_) if r != first["world"]])
    return [first, {"kind": "commit", "world": second_world,
                    "step": rng.randrange(steps // 2 + 1, steps - 1)}]


def _job(np_: int, plan: Dict[str, Any], timeout: float, env_extra: Dict[str, str]
         ) -> Dict[str, Any]:
    """Runs one job; returns rank 0's result with the seconds it took, or raises."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="tfdist-soak-") as out:
        plan_path = Path(out) / "plan.json"
        plan_path.write_text(json.dumps(plan))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TFDIST_ELASTIC": "1",
               "TFDIST_MAX_NP": "1", **env_extra}
        # The ranks run this file as a script, so that they use the tfdist a plain
        # `import tfdist` finds (PYTHONPATH's source tree first): the package
        # benchmarks/ would put the installed copy first, and the soak checks the
        # code under work.
        command = [sys.executable, str(root / "tfdistrun.py"), "-np", str(np_),
                   "--mpi-args", "--with-ft ulfm", "--timeout", str(timeout),
                   sys.executable, str(Path(__file__).resolve()), "--rank", str(plan_path),
                   out]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=str(root), capture_output=True, text=True)
        seconds = time.perf_counter() - start
        path = Path(out) / "result.json"
        if not path.exists():
            raise RuntimeError(f"no result (exit {done.returncode}, {seconds:.0f} s):\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
        result = json.loads(path.read_text())
        result["seconds"] = seconds
        result["evictions"] = (done.stdout + done.stderr).count("evicted by the other ranks")
        return result


def _check(result: Dict[str, Any], np_: int, kills: int) -> List[str]:
    """What is wrong with a job's result (empty when nothing)."""
    problems = []
    if result["final_size"] != np_ - kills:
        problems.append(f"ended at {result['final_size']} ranks, expected {np_ - kills}")
    def relative_error(got: List[float], wanted: np.ndarray) -> float:
        return float(np.max(np.abs(np.asarray(got) - wanted)) / np.max(np.abs(wanted)))

    error = relative_error(result["weights"], replay(result["sizes"]))
    result["max_weight_error"] = error
    if error > 1e-4:
        problems.append(f"final weights differ from the replay by {error:.2e} (relative)")
    if result["checkpoint_step"]:
        error = relative_error(result["checkpoint"],
                               replay(result["sizes"][:result["checkpoint_step"]]))
        if error > 1e-4:
            problems.append(f"checkpoint of step {result['checkpoint_step']} differs from "
                            f"the replay by {error:.2e}")
    return problems


def _burn(stop) -> None:
    while not stop.is_set():
        pass


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rank"]:
        _rank_main(argv[1], argv[2])
        return 0
    from benchmarks import _results

    parser = argparse.ArgumentParser(prog="python -m benchmarks.elastic_soak",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="soak runs (default 20; 0: none)")
    parser.add_argument("--np", type=int, default=4, help="ranks per soak run (default 4)")
    parser.add_argument("--steps", type=int, default=16, help="steps per soak run (default 16)")
    parser.add_argument("--load-minutes", type=float, default=10.0,
                        help="minutes of the full-load run (default 10; 0: none)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds a job may take before it counts as hung (default 600)")
    parser.add_argument("--seed", type=int, default=0)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    if args.np < 3:
        parser.error(f"--np must be at least 3 (a run kills two ranks), got {args.np}")
    rng = random.Random(args.seed)
    runs = []
    for index in range(args.runs):
        kind = KINDS[index % len(KINDS)]
        kills = _plan(kind, args.np, args.steps, rng)
        entry = {"run": index, "kind": kind, "kills": kills}
        try:
            result = _job(args.np, {"steps": args.steps, "kills": kills}, args.timeout, {})
            entry["problems"] = _check(result, args.np, len(kills))
            entry.update({k: result[k] for k in ("seconds", "final_size", "recoveries",
                                                 "max_weight_error", "checkpoint_step")})
        except RuntimeError as error:
            entry["problems"] = [str(error)]
        print(f"run {index} ({kind}): {entry['problems'] or 'ok'}", flush=True)
        runs.append(entry)
    load = None
    if args.load_minutes > 0:
        cores = os.cpu_count() or 1
        np_ = cores + 2
        stop = multiprocessing.Event()
        burners = [multiprocessing.Process(target=_burn, args=(stop,)) for _ in range(cores)]
        for burner in burners:
            burner.start()
        try:
            # Steps for about the minutes asked: a first job measures the pace.
            # Jobs of doubling length until the minutes are up (at least one).
            start = time.perf_counter()
            steps, jobs, recoveries, evictions, problems = 4, [], [], 0, []
            while not jobs or time.perf_counter() - start < args.load_minutes * 60:
                result = _job(np_, {"steps": steps, "kills": []}, args.timeout,
                              {"TFDIST_STALL_SHUTDOWN_TIME": "20"})
                problems += _check(result, np_, 0)
                recoveries += result["recoveries"]
                evictions += result["evictions"]
                jobs.append({"steps": steps, "seconds": result["seconds"]})
                if recoveries or evictions or problems:
                    break
                steps *= 2
            load = {"ranks": np_, "cores": cores, "busy_processes": cores,
                    "minutes": (time.perf_counter() - start) / 60, "jobs": jobs,
                    "recoveries": recoveries, "evictions": evictions, "problems": problems}
        finally:
            stop.set()
            for burner in burners:
                burner.join()
        print(f"load: {load}", flush=True)
    _results.publish(args, "elastic_soak", {"runs": runs, "load": load}, argv, ranks=args.np)
    failed = [r for r in runs if r["problems"]] + ([load] if load and (
        load["problems"] or load["recoveries"] or load["evictions"]) else [])
    return 1 if failed else 0


def summary(document: Dict[str, Any]) -> str:
    """Markdown: one line per soak run, then the load run."""
    lines = ["| run | kind | kills (rank@step) | seconds | final ranks | weight error (rel.) | "
             "result |", "|---|---|---|---|---|---|---|"]
    for run in document["runs"]:
        kills = ", ".join(f"{k['kind']} {k['world']}@{k['step']}" for k in run["kills"])
        lines.append(f"| {run['run']} | {run['kind']} | {kills} | {run.get('seconds', 0):.0f} | "
                     f"{run.get('final_size', '-')} | {run.get('max_weight_error', 0):.1e} | "
                     f"{'; '.join(run['problems']) or 'ok'} |")
    load = document.get("load")
    if load:
        lines.append("")
        lines.append(f"Load: {load['ranks']} ranks on {load['cores']} cores plus "
                     f"{load['busy_processes']} busy processes for {load['minutes']:.1f} min: "
                     f"{len(load['recoveries'])} recoveries, {load['evictions']} evictions, "
                     f"{'; '.join(load['problems']) or 'weights as replayed'}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
