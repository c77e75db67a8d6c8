"""Restore: rank 0 picks, reads and verifies a checkpoint while every rank receives it.

Every rank takes the same steps; rank 0 decides and the others follow its
messages (tfdist.checkpoint.messages):

1. Rank 0 opens the newest file not tried yet. Opening reads metadata only:
   the manifest against its digest, each dataset's dtype and size against
   the manifest; a file that fails is skipped. Every rank receives the
   header: the step, ``extra`` and each array's path, shape and dtype.
2. Every rank builds its model from the header if it is not built
   (tfdist.checkpoint.model_build), pairs each saved array with a variable
   (by path where the paths are unique, else by position:
   tfdist.checkpoint.matching), checks that the checkpoint fits (how many,
   shapes, dtypes, names that agree), and all agree (one allreduce of a
   flag). From here on every rank lists its variables in the file's
   order. If it does not
   fit somewhere, rank 0 still reads and verifies the whole file: if it
   verifies, every rank raises CheckpointError naming the variable and both
   shapes, and nothing is modified; if it is damaged, the next file is
   tried, as if the damage had been found first.
3. The transfer (tfdist.checkpoint.transfer): on rank 0 one thread reads
   and verifies the arrays in order (CRC-32 of each) into the snapshot
   buffers, and two threads broadcast each array as soon as it is read,
   so that reading the file overlaps sending it. Every rank keeps what it
   receives aside (staged); no variable is touched.
4. Rank 0 broadcasts the verdict: every array and every rank's state
   verified, or what failed.
5. Verified: every rank assigns the staged values (each variable takes
   over its staged tensor's buffer, no copy) and receives its own state.
   Damaged: the staged values are dropped, and the next file is tried.
6. Once a file has been restored, rank 0 renames the newer files it
   skipped as damaged to ``<name>.damaged``.

The price of step 3 against reading everything first: a damaged file is
found only after it has been sent (it is then sent for nothing), and
until the verdict every rank holds the incoming values beside its
variables' (docs/fault_tolerance.md, Limits).
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import tensorflow as tf

from tfdist import runtime
from tfdist.checkpoint import file_format, local_state, matching, messages, transfer, writer
from tfdist.checkpoint.errors import CheckpointError
from tfdist.checkpoint.snapshot import SnapshotBuffers

# What rank 0 found on reading a file: {} when every array verified,
# {"damaged": why} (try the next file) or {"error": why} (raise everywhere).
Verdict = Dict[str, str]


def variable_path(variable: Any) -> str:
    """The name a variable is saved under and named by in errors."""
    return str(getattr(variable, "path", None) or variable.name)


def dtype_name(variable: Any) -> str:
    return tf.as_dtype(variable.dtype).name


# Each rank's variables by group, for a checkpoint's header, and why they cannot take it
# ("" if they can): restore builds an unbuilt model from the header first.
TargetsFor = Callable[[Mapping[str, Any]], Tuple[Mapping[str, List[Any]], str]]


def load_newest(directory: str, targets_for: TargetsFor, snapshot: SnapshotBuffers,
                pending_failure: str) -> Optional[Dict[str, Any]]:
    """Collective: restores the newest checkpoint in ``directory`` that verifies into the
    variables ``targets_for(header)`` gives; its header (path, step, extra, ...), or None if
    the directory holds none.

    ``snapshot``: rank 0's buffers, read into and kept for the next save.
    ``pending_failure``: rank 0's failed background write, if any, which
    every rank then raises. Damaged files are skipped with a warning each;
    once an older file has been restored, rank 0 renames them aside
    (``<name>.damaged``), so that later saves of lower steps sort after no
    damaged file and a later restore does not try them again.
    """
    candidates = _Candidates(directory, pending_failure) if runtime.rank() == 0 else None
    header = None
    try:
        header = _load(candidates, targets_for, snapshot)
        return header
    finally:
        for path, why in candidates.failures if candidates is not None else ():
            fate = "left in place"
            if header is not None:
                try:
                    fate = f"renamed to {writer.set_aside(path)}"
                except OSError as error:
                    fate = f"left in place (renaming it failed: {error})"
            # The caller of tfdist.checkpoint.restore is two frames up.
            warnings.warn(f"tfdist.checkpoint: skipping a damaged checkpoint: {path}: {why}; "
                          f"{fate}", stacklevel=3)


class _Candidates:
    """Rank 0's walk through a directory's checkpoint files, newest first."""

    def __init__(self, directory: str, pending_failure: str) -> None:
        self.directory = directory
        self.pending_failure = pending_failure
        self.failures: List[Tuple[str, str]] = []  # (path, why), for every file skipped
        self._paths = [path for _, path in file_format.checkpoint_files(directory)]

    def next(self) -> Tuple[Optional[file_format.CheckpointReader], Dict[str, Any]]:
        """The next file whose metadata verifies, open, and its header; else (None, why not)."""
        if self.pending_failure:
            return None, {"error": self.pending_failure}
        while self._paths:
            path = self._paths.pop(0)
            try:
                reader = file_format.CheckpointReader(path)
            except file_format.CorruptCheckpoint as error:
                self.failures.append((path, str(error)))
                continue
            return reader, {"path": path, "step": reader.step, "extra": reader.extra,
                            "world_size": reader.world_size, "groups": reader.entries,
                            "model_build": reader.model_build,
                            "rank_state_arrays": reader.rank_state_arrays()}
        if self.failures:
            return None, {"error": f"no checkpoint in {self.directory} verifies:\n  " +
                          "\n  ".join(f"{p}: {why}" for p, why in self.failures) +
                          "\nThey are left in place; move them away to start from scratch."}
        return None, {"none": True}


def _load(candidates: Optional[_Candidates], targets_for: TargetsFor,
          snapshot: SnapshotBuffers) -> Optional[Dict[str, Any]]:
    while True:
        reader, header = candidates.next() if candidates is not None else (None, None)
        try:
            header = messages.broadcast_json(header, "tfdist.checkpoint.restore.header")
            if "error" in header:
                raise CheckpointError(header["error"])
            if header.get("none"):
                return None
            verdict = _load_file(header, targets_for, reader, snapshot)
        finally:
            if reader is not None:
                reader.close()
        if "error" in verdict:
            raise CheckpointError(verdict["error"])
        if not verdict:
            return header
        if candidates is not None:
            candidates.failures.append((header["path"], verdict["damaged"]))


def _load_file(header: Mapping[str, Any], targets_for: TargetsFor,
               reader: Optional[file_format.CheckpointReader],
               snapshot: SnapshotBuffers) -> Verdict:
    """Steps 2 to 5 for one file (``reader`` on rank 0, None elsewhere); the verdict."""
    targets, problem = targets_for(header)
    ordered, mismatch = _in_file_order(header, targets)
    mismatch = problem or mismatch
    if messages.on_any_rank(bool(mismatch), "tfdist.checkpoint.restore.mismatch"):
        # Only a file that verifies may be refused for not fitting.
        verdict = _broadcast_verdict(_read(reader, snapshot)[1] if reader else None)
        if verdict:
            return verdict
        raise CheckpointError(mismatch or f"checkpoint {header['path']} does not fit the "
                                          f"variables of another rank; nothing was restored")
    # From here on the variables are in the file's order, array for array.
    variables = [v for group in file_format.GROUPS for v in ordered[group]]
    staged, contents, verdict = _transfer(variables, reader, snapshot)
    verdict = _broadcast_verdict(verdict)
    if verdict:
        return verdict
    # Verified on rank 0 and fitting on every rank: from here nothing can refuse the values.
    for index, variable in enumerate(variables):
        value, staged[index] = staged[index], None  # the last reference: assign adopts its buffer
        variable.assign(value)
    if contents is not None:
        snapshot.adopt(contents.groups)
    _restore_rank_states(header, contents, targets)
    return {}


def _in_file_order(header: Mapping[str, Any], targets: Mapping[str, List[Any]]
                   ) -> Tuple[Dict[str, List[Any]], str]:
    """Each group's variables in the order of the file's arrays (tfdist.checkpoint.matching),
    and why the checkpoint does not fit them, naming the variable and both shapes ("" if
    it fits)."""
    path = header["path"]
    ordered: Dict[str, List[Any]] = {}
    for group in file_format.GROUPS:
        entries = header["groups"].get(group, [])
        current = targets[group]
        if len(entries) != len(current):
            saved_paths = {e.get("path") for e in entries}
            current_paths = {variable_path(v) for v in current}
            missing = sorted(current_paths - saved_paths)
            extra = sorted(p or "(unnamed)" for p in saved_paths - current_paths)
            hint = ""
            if not current and group == "model":
                hint = (" (the model is not built: build it before restoring, e.g. with "
                        "model.build(input_shape); this checkpoint does not record the "
                        "input shape to build it from)")
            return {}, (f"checkpoint {path} holds {len(entries)} {group} variables, the "
                        f"{group} being restored has {len(current)}{hint}; missing from the "
                        f"checkpoint: {missing or 'none by name'}; only in the checkpoint: "
                        f"{extra or 'none by name'}")
        order, disagreement = matching.match([e.get("path") for e in entries],
                                             [variable_path(v) for v in current])
        if disagreement:
            return {}, (f"checkpoint {path} does not match the {group} variables: "
                        f"{disagreement}; nothing was restored")
        ordered[group] = [current[i] for i in order]
        for index, (entry, variable) in enumerate(zip(entries, ordered[group])):
            shape = tuple(int(d) for d in variable.shape)
            dtype = dtype_name(variable)
            if tuple(entry["shape"]) != shape or entry["dtype"] != dtype:
                return {}, (f"checkpoint {path} does not match {group} variable "
                            f"'{variable_path(variable)}': the checkpoint has shape "
                            f"{tuple(entry['shape'])} {entry['dtype']} (saved as "
                            f"'{entry.get('path')}', position {index}), the variable has shape "
                            f"{shape} {dtype}; nothing was restored")
    return ordered, ""


def _read(reader: file_format.CheckpointReader, snapshot: SnapshotBuffers,
          each: Optional[file_format.ArrayDone] = None
          ) -> Tuple[Optional[file_format.Contents], Verdict]:
    """Rank 0's read and verification of the whole file, into the snapshot buffers."""
    try:
        return reader.contents(snapshot.buffers(), each), {}
    except file_format.CorruptCheckpoint as error:
        return None, {"damaged": str(error)}
    except Exception as error:  # noqa: BLE001  (every rank must learn of it)
        return None, {"error": f"reading {reader.path} failed: {type(error).__name__}: {error}"}


def _transfer(variables: List[Any], reader: Optional[file_format.CheckpointReader],
              snapshot: SnapshotBuffers
              ) -> Tuple[List[Any], Optional[file_format.Contents], Optional[Verdict]]:
    """Step 3: every rank's staged values (one per variable, in order), and on rank 0 the
    contents read and the verdict (None elsewhere)."""
    if runtime.size() == 1:
        contents, verdict = _read(reader, snapshot)
        arrays = [a for g in file_format.GROUPS for a in contents.groups[g]] if contents else []
        return arrays, contents, verdict
    staged, outcome = transfer.send_all(
        variables, (lambda deliver: _read(reader, snapshot, deliver)) if reader else None)
    contents, verdict = outcome if outcome is not None else (None, None)
    return staged, contents, verdict


def _broadcast_verdict(verdict: Optional[Verdict]) -> Verdict:
    """Rank 0's verdict on every rank; the usual one, {}, in a single tiny broadcast."""
    data = json.dumps(verdict).encode() if verdict else b""
    data = messages.broadcast_bytes(data if verdict is not None else None,
                                    "tfdist.checkpoint.restore.verdict")
    return json.loads(data) if data else {}


def _restore_rank_states(header: Mapping[str, Any],
                         contents: Optional[file_format.Contents],
                         targets: Mapping[str, List[Any]]) -> None:
    size = runtime.size()
    if header["world_size"] != size:
        if header["rank_state_arrays"] and runtime.rank() == 0:
            warnings.warn(f"tfdist.checkpoint: {header['path']} was saved by "
                          f"{header['world_size']} ranks and is restored on {size}: each rank's "
                          f"own state (e.g. compression residuals) starts fresh",
                          stacklevel=6)  # restore's caller
        runtime.restore_rank_state({})
        return
    if not header["rank_state_arrays"]:
        runtime.restore_rank_state({})
        return
    mine = b""
    for rank in range(size):
        blob = (file_format.serialize_arrays(contents.rank_states[rank])
                if runtime.rank() == 0 else None)
        received = messages.broadcast_bytes(blob, f"tfdist.checkpoint.restore.rank_state.{rank}")
        if rank == runtime.rank():
            mine = received
    state = file_format.deserialize_arrays(mine) if mine else {}
    runtime.restore_rank_state(local_state.restore(state, targets))
