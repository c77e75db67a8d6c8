"""Checkpoints that survive crashes: save, restore, latest, wait.

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
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfdist import ops, runtime
from tfdist.checkpoint import file_format, writer
from tfdist.checkpoint.snapshot import SnapshotBuffers, shared_value
from tfdist.preemption import PREEMPTED_EXIT_CODE, preempted, restart_count

__all__ = ["CheckpointError", "PREEMPTED_EXIT_CODE", "Restored", "latest", "preempted",
           "restart_count", "restore", "save", "wait"]


# Rank 0's host copies, reused by the next save (see snapshot.py). Like the
# pending write in writer.py, process state that save() needs across calls.
_SNAPSHOT = SnapshotBuffers()
# Threads issuing restore's broadcasts: two keep one transfer and one assign going.
_RESTORE_THREADS = 2


class CheckpointError(RuntimeError):
    """A checkpoint could not be saved, or none could be restored; the message says why."""


@dataclass(frozen=True)
class Restored:
    """What ``restore`` found: the step and ``extra`` given to ``save``, and the file."""

    step: int
    extra: Dict[str, Any] = field(default_factory=dict)
    path: str = ""


def _variable_path(variable: Any) -> str:
    return str(getattr(variable, "path", None) or variable.name)


def _dtype_name(variable: Any) -> str:
    return tf.as_dtype(variable.dtype).name


def _targets(model: Any, optimizer: Any, variables: Iterable[Any]) -> Dict[str, List[Any]]:
    """The variables of each group, in a fixed order; builds the optimizer if needed."""
    if optimizer is None and model is not None:
        optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not getattr(optimizer, "built", True):
        if model is None:
            raise CheckpointError("the optimizer is not built yet and no model was given to "
                                  "build it for: pass model= or call optimizer.build(...)")
        optimizer.build(model.trainable_variables)
    return {"model": list(model.variables) if model is not None else [],
            "optimizer": list(optimizer.variables) if optimizer is not None else [],
            "variables": list(variables)}


def _broadcast_bytes(data: Optional[bytes], name: str) -> bytes:
    """Rank 0's ``data`` on every rank (the others pass None)."""
    if runtime.size() == 1:
        return data or b""
    is_root = runtime.rank() == 0
    length = np.array([len(data) if is_root and data else 0], dtype=np.int64)
    length = int(ops.broadcast(length, root_rank=0, name=f"{name}.length").numpy()[0])
    if length == 0:
        return b""
    payload = (np.frombuffer(data, np.uint8) if is_root else np.zeros(length, np.uint8))
    return ops.broadcast(payload, root_rank=0, name=f"{name}.data").numpy().tobytes()


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
    rank's ``tfdist.runtime.rank_state()``. Training waits only while rank 0
    copies the values to host memory; with ``blocking=False`` the file is
    written in the background (``wait()`` waits for it), with
    ``blocking=True`` every rank returns once it is durable. The newest
    ``keep`` checkpoints are kept; older ones are deleted once the new one
    is durable.
    """
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    try:
        extra_json = json.loads(json.dumps(dict(extra or {})))
    except (TypeError, ValueError) as error:
        raise TypeError(f"extra must be a JSON-serialisable dict: {error}") from None
    step = int(step)
    directory = str(directory)
    targets = _targets(model, optimizer, variables)
    # A save waits for the previous one; if that failed, every rank raises.
    pending_failure = _pending_failure() if runtime.rank() == 0 else ""
    states, pending_failure = _gather_states(file_format.serialize_arrays(runtime.rank_state()),
                                             pending_failure, "tfdist.checkpoint.save")
    if pending_failure:
        raise CheckpointError(pending_failure)
    path = f"{directory.rstrip('/')}/{file_format.file_name(step)}"
    failure = ""
    if runtime.rank() == 0:
        contents = file_format.Contents(
            step=step, extra=extra_json,
            groups={g: _SNAPSHOT.copy(g, vs) for g, vs in targets.items()},
            paths={g: [_variable_path(v) for v in vs] for g, vs in targets.items()},
            world_size=runtime.size(),
            rank_states=[file_format.deserialize_arrays(s) for s in states])
        if blocking:
            try:
                writer.write_durably(directory, contents, keep)
            except Exception as error:  # noqa: BLE001  (every rank must learn of it)
                failure = f"saving step {step} to {path} failed: {type(error).__name__}: {error}"
        else:
            writer.PENDING.start(directory, contents, keep)
    if blocking:
        failure = _broadcast_bytes(failure.encode(), "tfdist.checkpoint.save.done").decode()
        if failure:
            raise CheckpointError(failure)
    return path


def latest(directory: str) -> Optional[str]:
    """The newest checkpoint in ``directory`` that verifies, or None. Not a collective."""
    path, _, _ = file_format.newest_valid(str(directory))
    return path


def _choose(directory: str) -> Tuple[Dict[str, Any], Optional[file_format.Contents]]:
    """Rank 0's choice of checkpoint: the JSON header every rank receives, and its contents."""
    # Into the snapshot buffers, mapped already; what is read becomes the
    # buffers of the next save (a job that just started has none yet).
    path, contents, failures = file_format.newest_valid(directory, _SNAPSHOT.buffers())
    if contents is not None:
        _SNAPSHOT.adopt(contents.groups)
    for failure in failures:
        warnings.warn(f"tfdist.checkpoint: skipping a damaged checkpoint: {failure}",
                      stacklevel=3)
    if path is None:
        if failures:
            return {"error": f"no checkpoint in {directory} verifies:\n  " +
                    "\n  ".join(failures)}, None
        return {"none": True}, None
    return {"path": path, "step": contents.step, "extra": contents.extra,
            "world_size": contents.world_size,
            "groups": {g: [file_format.array_entry(a, p) for a, p in
                           zip(contents.groups[g], contents.paths[g])]
                       for g in file_format.GROUPS},
            "rank_state_arrays": sum(len(s) for s in contents.rank_states)}, contents


def _check_match(header: Mapping[str, Any], targets: Mapping[str, List[Any]]) -> None:
    """Raises CheckpointError, naming the variable and both shapes, if the checkpoint does not fit."""
    path = header["path"]
    for group, entries in header["groups"].items():
        current = targets[group]
        if len(entries) != len(current):
            saved_paths = {e["path"] for e in entries}
            current_paths = {_variable_path(v) for v in current}
            missing = sorted(current_paths - saved_paths)
            extra = sorted(saved_paths - current_paths)
            hint = " (is the model built?)" if not current else ""
            raise CheckpointError(
                f"checkpoint {path} holds {len(entries)} {group} variables, the {group} being "
                f"restored has {len(current)}{hint}; missing from the checkpoint: "
                f"{missing or 'none by name'}; only in the checkpoint: {extra or 'none by name'}")
        for index, (entry, variable) in enumerate(zip(entries, current)):
            shape = tuple(int(d) for d in variable.shape)
            dtype = _dtype_name(variable)
            if tuple(entry["shape"]) != shape or entry["dtype"] != dtype:
                raise CheckpointError(
                    f"checkpoint {path} does not match {group} variable {index} "
                    f"'{_variable_path(variable)}': the checkpoint has shape "
                    f"{tuple(entry['shape'])} {entry['dtype']} (saved as '{entry['path']}'), "
                    f"the variable has shape {shape} {dtype}; nothing was restored")


def restore(directory: str, *, model: Any = None, optimizer: Any = None,
            variables: Sequence[Any] = ()) -> Optional[Restored]:
    """Collective: loads the newest checkpoint in ``directory`` that verifies into every rank.

    Returns None when the directory holds no checkpoint, else a Restored with
    ``.step``, ``.extra`` and ``.path``. Builds the optimizer if it is not
    built. Damaged files are skipped with a warning naming them; if none
    verifies, raises CheckpointError listing each file and why. A checkpoint
    that does not fit (a missing variable, another shape or dtype) raises
    CheckpointError naming the variable and both shapes, and changes nothing.
    Per-rank state comes back to each rank when the job has as many ranks as
    the one that saved; otherwise it is reset (``restore_rank_state({})``)
    with a warning.
    """
    directory = str(directory)
    targets = _targets(model, optimizer, variables)
    is_root = runtime.rank() == 0
    contents = None
    header: Dict[str, Any] = {}
    if is_root:
        failure = _pending_failure()  # the newest file must be complete before choosing
        header, contents = ({"error": failure}, None) if failure else _choose(directory)
    text = _broadcast_bytes(json.dumps(header).encode() if is_root else None,
                            "tfdist.checkpoint.restore.header")
    header = json.loads(text)
    if "error" in header:
        raise CheckpointError(header["error"])
    if header.get("none"):
        return None
    _check_match(header, targets)
    _assign_from_root([v for g in file_format.GROUPS for v in targets[g]],
                      [a for g in file_format.GROUPS for a in contents.groups[g]]
                      if is_root else None)
    _restore_rank_states(header, contents)
    return Restored(step=int(header["step"]), extra=header["extra"], path=header["path"])


def _assign_from_root(variables: List[Any], arrays: Optional[List[np.ndarray]]) -> None:
    """Assigns rank 0's ``arrays`` to ``variables`` on every rank, one broadcast per variable.

    Rank 0 has read and verified every array before this is called, and
    every rank has checked that they fit, so nothing here can refuse them.
    Per variable rather than one concatenation per dtype: the state is
    copied fewer times (no concatenate, no split). Two threads issue the
    broadcasts, so that one variable is assigned while the next one is in
    transfer (the ops release the GIL; ranks match them by name, whatever
    the order). On the receiving ranks the op's input is the variable's own
    value, which shares its buffer: no array is allocated and copied only
    to be overwritten (docs/fault_tolerance.md has the measurements).
    """
    if runtime.size() == 1:
        for variable, array in zip(variables, arrays):
            variable.assign(array)
        return

    def receive(index: int) -> None:
        variable = variables[index]
        source = arrays[index] if arrays is not None else shared_value(variable)
        received = ops.broadcast(source, root_rank=0,
                                 name=f"tfdist.checkpoint.restore.{index}")
        del source  # no second user of the variable's buffer: assign copies into it in place
        variable.assign(received)

    with ThreadPoolExecutor(_RESTORE_THREADS, thread_name_prefix="tfdist-restore") as pool:
        for future in [pool.submit(receive, index) for index in range(len(variables))]:
            future.result()


def _restore_rank_states(header: Mapping[str, Any], contents: Any) -> None:
    size = runtime.size()
    if header["world_size"] != size:
        if header["rank_state_arrays"] and runtime.rank() == 0:
            warnings.warn(f"tfdist.checkpoint: {header['path']} was saved by "
                          f"{header['world_size']} ranks and is restored on {size}: each rank's "
                          f"own state (e.g. compression residuals) starts fresh", stacklevel=3)
        runtime.restore_rank_state({})
        return
    if not header["rank_state_arrays"]:
        runtime.restore_rank_state({})
        return
    mine = b""
    for rank in range(size):
        blob = (file_format.serialize_arrays(contents.rank_states[rank])
                if runtime.rank() == 0 else None)
        received = _broadcast_bytes(blob, f"tfdist.checkpoint.restore.rank_state.{rank}")
        if rank == runtime.rank():
            mine = received
    runtime.restore_rank_state(file_format.deserialize_arrays(mine) if mine else {})
