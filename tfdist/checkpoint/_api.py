"""Checkpoints that survive crashes: save, restore, latest, wait (exported by tfdist.checkpoint).

    restored = tfdist.checkpoint.restore("ckpt", model=model, optimizer=opt)
    start = restored.step if restored else 0
    for step in range(start, steps):
        train_step(step)
        if (step + 1) % 100 == 0:
            tfdist.checkpoint.save("ckpt", step + 1, model=model, optimizer=opt)
    tfdist.checkpoint.wait()

``save`` and ``restore`` are collectives: every rank calls them, with the
same arguments. Rank 0 writes and reads the files; every rank's own state
(``tfdist.runtime.rank_state()``) travels to and from rank 0. A save holds
training only while rank 0 copies the variables into host memory; the file
is written, fsync'd and renamed into place on a background thread. A save
waits for the previous one. ``restore`` takes the newest file that
verifies, skipping damaged ones with a warning, and gives every rank the
same values. See docs/fault_tolerance.md for the format and the guarantees.

``optimizer=None`` with a Keras model means the model's own optimizer
(``model.optimizer``), so that one ``model=`` argument saves everything
``fit`` trains.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfdist import _arguments, ops, runtime
from tfdist.checkpoint import file_format, loader, local_state, messages, model_build, writer
from tfdist.checkpoint.errors import CheckpointError
from tfdist.checkpoint.snapshot import SnapshotBuffers
from tfdist.preemption import PREEMPTED_EXIT_CODE, preempted, restart_count

__all__ = ["CheckpointError", "PREEMPTED_EXIT_CODE", "Restored", "latest", "preempted",
           "restart_count", "restore", "save", "wait"]


# Rank 0's host copies, reused by the next save (see snapshot.py). Like the
# pending write in writer.py, process state that save() needs across calls.
_SNAPSHOT = SnapshotBuffers()


@dataclass(frozen=True)
class Restored:
    """What ``restore`` found: the step and ``extra`` given to ``save``, and the file."""

    step: int
    extra: Dict[str, Any] = field(default_factory=dict)
    path: str = ""


def _targets(model: Any, optimizer: Any, variables: Iterable[Any]) -> Dict[str, List[Any]]:
    """The variables of each group, in a fixed order; builds the optimizer if needed.

    Not while the model is unbuilt: an optimizer built for a model's (empty)
    variables refuses the variables the model gets later, and ``fit`` fails
    with "Unknown variable". Keras builds both in the first step.
    """
    if isinstance(variables, (str, bytes)) or not hasattr(variables, "__iter__") or hasattr(
            variables, "assign"):
        raise TypeError("variables must be a list of variables (tf.Variable or Keras "
                        f"variables), got {type(variables).__name__}")
    if model is not None and not hasattr(model, "variables"):
        raise TypeError(f"model must be a Keras model (or anything with .variables), got "
                        f"{type(model).__name__}")
    if optimizer is None and model is not None:
        optimizer = getattr(model, "optimizer", None)
    model_unbuilt = model is not None and not getattr(model, "built", True)
    if optimizer is not None and not getattr(optimizer, "built", True) and not model_unbuilt:
        if model is None:
            raise CheckpointError("the optimizer is not built yet and no model was given to "
                                  "build it for: pass model= or call optimizer.build(...)")
        optimizer.build(model.trainable_variables)
    return {"model": list(model.variables) if model is not None else [],
            "optimizer": list(optimizer.variables) if optimizer is not None else [],
            "variables": list(variables)}


def _gather_states(own_state: bytes, failure: str, name: str) -> Tuple[List[bytes], str]:
    """Every rank's serialized per-rank state, and rank 0's ``failure`` message, on every rank.

    One allgather of two lengths per rank, and a second one of the bytes only
    when some rank has any: a save of a job without per-rank state costs one
    tiny collective.
    """
    message = failure.encode()
    if runtime.size() == 1:
        return [own_state], failure
    lengths = ops.allgather(np.array([[len(own_state), len(message)]], np.int64),
                            name=f"{name}.lengths").numpy()
    if not lengths.any():
        return [b""] * len(lengths), ""
    data = ops.allgather(np.frombuffer(own_state + message, np.uint8),
                         name=f"{name}.data").numpy().tobytes()
    states, offset = [], 0
    for state_length, message_length in lengths:
        states.append(data[offset:offset + state_length])
        offset += state_length + message_length
    root_message = data[lengths[0][0]:lengths[0][0] + lengths[0][1]].decode()
    return states, root_message


def _pending_failure() -> str:
    """Waits for this process's pending write and pruning; its error message, or "" if none."""
    try:
        writer.PENDING.finish()
    except writer.WriteFailed as error:
        return str(error)
    return ""


def wait() -> None:
    """Blocks until this process's pending checkpoint write is durable (fsync'd and renamed).

    Only rank 0 writes, so on other ranks it returns at once. Raises
    CheckpointError if the background write failed. Not a collective.
    """
    try:
        writer.PENDING.wait()
    except writer.WriteFailed as error:
        raise CheckpointError(str(error)) from error


def save(directory: str, step: int, *, model: Any = None, optimizer: Any = None,
         variables: Sequence[Any] = (), extra: Optional[Mapping[str, Any]] = None,
         keep: int = 3, blocking: bool = False) -> str:
    """Collective: saves the state of training at ``step``; returns the checkpoint's path.

    Saves all of ``model.variables`` (non-trainable ones and seed-generator
    states included), the optimizer's variables (``model.optimizer`` when
    ``optimizer`` is None), ``variables``, ``step``, ``extra`` (a
    JSON-serialisable dict, e.g. the epoch and data position) and every
    rank's ``tfdist.runtime.rank_state()`` and values of local variables
    (``register_local_var``). Training waits only while rank 0
    copies the values to host memory; with ``blocking=False`` the file is
    written in the background (``wait()`` waits for it), with
    ``blocking=True`` every rank returns once it is durable. The newest
    ``keep`` checkpoints are kept; older ones are deleted once the new one
    is durable.
    """
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    directory = _arguments.path(directory, "directory")
    keep = _arguments.integer(keep, "keep", minimum=1)
    _arguments.boolean(blocking, "blocking")
    try:
        extra_json = json.loads(json.dumps(dict(extra or {})))
    except (TypeError, ValueError) as error:
        raise TypeError(f"extra must be a JSON-serialisable dict: {error}") from None
    step = int(step)
    targets = _targets(model, optimizer, variables)
    # A save waits for the previous one; if that failed, every rank raises.
    pending_failure = _pending_failure() if runtime.rank() == 0 else ""
    own_state = {**runtime.rank_state(), **local_state.collect(targets)}
    states, pending_failure = _gather_states(file_format.serialize_arrays(own_state),
                                             pending_failure, "tfdist.checkpoint.save")
    if pending_failure:
        raise CheckpointError(pending_failure)
    path = f"{directory.rstrip('/')}/{file_format.file_name(step)}"
    failure = ""
    if runtime.rank() == 0:
        contents = file_format.Contents(
            step=step, extra=extra_json,
            groups={g: _SNAPSHOT.copy(g, vs) for g, vs in targets.items()},
            paths={g: [loader.variable_path(v) for v in vs] for g, vs in targets.items()},
            world_size=runtime.size(),
            rank_states=[file_format.deserialize_arrays(s) for s in states],
            model_build=model_build.config(model))
        if blocking:
            try:
                writer.write_durably(directory, contents, keep)
            except Exception as error:  # noqa: BLE001  (every rank must learn of it)
                failure = f"saving step {step} to {path} failed: {type(error).__name__}: {error}"
        else:
            writer.PENDING.start(directory, contents, keep)
    if blocking:
        failure = messages.broadcast_bytes(failure.encode(),
                                           "tfdist.checkpoint.save.done").decode()
        if failure:
            raise CheckpointError(failure)
    return path


def latest(directory: str) -> Optional[str]:
    """The newest checkpoint in ``directory`` that verifies, or None. Not a collective."""
    path, _, _ = file_format.newest_valid(_arguments.path(directory, "directory"))
    return path


def restore(directory: str, *, model: Any = None, optimizer: Any = None,
            variables: Sequence[Any] = ()) -> Optional[Restored]:
    """Collective: loads the newest checkpoint in ``directory`` that verifies into every rank.

    Returns None when the directory holds no checkpoint, else a Restored with
    ``.step``, ``.extra`` and ``.path``. A Keras model that is not built yet
    (a Sequential without an Input) is built first from the input shape the
    checkpoint records; then the optimizer, if it is not built. With no
    checkpoint an unbuilt model and its optimizer stay unbuilt (Keras builds
    them in the first step). Each array goes to the variable of its saved
    path where the paths are unique, else by position
    (tfdist.checkpoint.matching); paths that disagree raise CheckpointError
    naming both. Damaged files are skipped with a warning naming them, and
    renamed ``<name>.damaged`` once an older file has been restored; if
    none verifies, raises CheckpointError listing each file and why (and
    renames nothing). A checkpoint that does not fit (a missing variable,
    another shape or dtype) raises CheckpointError naming the variable and
    both shapes, and changes nothing.
    Per-rank state comes back to each rank when the job has as many ranks as
    the one that saved; otherwise it is reset (``restore_rank_state({})``)
    with a warning. Local variables get each rank's own saved value under
    the same condition, and rank 0's otherwise.
    """
    directory = _arguments.path(directory, "directory")
    _targets(model, optimizer, variables)  # builds the optimizer of a built model, as before

    def targets_for(header: Mapping[str, Any]) -> Tuple[Dict[str, List[Any]], str]:
        problem = ""
        recorded = header.get("model_build")
        if model is not None and not getattr(model, "built", True) and recorded:
            problem = model_build.build(model, recorded)
        return _targets(model, optimizer, variables), problem

    # The newest file must be complete before choosing one.
    pending_failure = _pending_failure() if runtime.rank() == 0 else ""
    header = loader.load_newest(str(directory), targets_for, _SNAPSHOT, pending_failure)
    if header is None:
        return None
    return Restored(step=int(header["step"]), extra=header["extra"], path=header["path"])
