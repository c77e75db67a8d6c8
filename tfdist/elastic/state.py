"""What elastic training rolls back and shares: ``State``, ``ObjectState``, ``TensorFlowState``.

    state = tfdist.elastic.TensorFlowState(model.variables + opt.variables, step=0, epoch=0)

    @tfdist.elastic.run
    def train(state):
        while state.step < steps:
            train_step()
            state.step += 1
            state.commit()          # a host copy: cheap enough for every step

A state holds the training's variables and some plain attributes (given as
keyword arguments). ``commit()`` copies them into host memory (numpy),
together with this rank's compressor state (``tfdist.runtime.rank_state()``:
error-feedback residuals, PowerSGD's Q, step counts); ``restore()`` puts the
last commit back. ``sync()`` is a collective of the global set: rank 0's
variables and attributes go to every rank, and then count as committed.
``tfdist.elastic.run`` calls ``restore(); sync(); on_reset()`` after every
membership change, so the ranks carry on from rank 0's last commit. A rank
that joins has committed nothing: it only syncs.

Attributes travel and are kept as JSON (no pickle: ranks exchange data, not
code), so they must be JSON values (numbers, strings, bools, None, lists and
dicts with string keys; numpy scalars are taken as their Python values).
A tuple comes back as a list, on every rank alike. Only the attributes given
to the constructor are part of the state, as in Horovod.

Compressor state: survivors get their own committed state back. The parts of
it that are equal on every rank by construction (step counts, PowerSGD's
Q, which is allreduced) go from rank 0 to every rank in ``sync()``, so that
a rank that joins takes the same branch (dense before ``start_step``, or
compressed) and the same warm start as the others; the per-rank parts
(residuals, top-k velocities) start empty on a rank that joins.

Local variables (``tfdist.is_local_variable``) are committed and restored on
each rank but not synced: their values are each rank's own, and a rank that
joins keeps the values it created them with.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfdist import ops, runtime
from tfdist.checkpoint import file_format, messages
from tfdist.checkpoint.snapshot import shared_value
from tfdist.elastic import spares
from tfdist.local_variables import is_local

# Compressor state that is the same on every rank (cc/tf/compression_ops.cc's
# keys): step counts, and PowerSGD's Q (the result of an allreduce).
SHARED_RANK_STATE_PREFIXES = ("step/", "powersgd.q/")


def _json_value(value: Any) -> Any:
    """``json.dumps``' hook: numpy scalars and 0-d arrays as Python values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


class State:
    """Training state that elastic training commits, restores and syncs (Horovod's API).

    ``State(step=0, epoch=0)`` makes ``state.step`` and ``state.epoch``
    attributes that are part of the state. Subclasses add variables
    (``TensorFlowState``, ``tfdist.keras.elastic.KerasState``).
    """

    def __init__(self, **attrs: Any) -> None:
        self._reset_callbacks: List[Callable[[], None]] = []
        self._attr_names = list(attrs)
        self._saved_attrs: Optional[str] = None
        self._saved_rank_state: Optional[Dict[str, np.ndarray]] = None
        for name, value in attrs.items():
            if name.startswith("_") or hasattr(type(self), name):
                raise ValueError(f"state attribute {name!r} would hide the State's own "
                                 f"{name!r}; choose another name")
            setattr(self, name, value)

    # ------------------------------------------------------------ reset callbacks

    def register_reset_callbacks(self, callbacks: Sequence[Callable[[], None]]) -> None:
        """Adds ``callbacks`` (functions of no arguments) to those ``on_reset`` runs, in order.

        Use them for what depends on the number of ranks: the learning rate,
        process sets (gone after a membership change), the data shards.
        """
        for callback in callbacks:
            if not callable(callback):
                raise TypeError(f"reset callbacks must be callable, got {callback!r}")
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        """Runs the reset callbacks, in the order they were registered."""
        for callback in self._reset_callbacks:
            callback()

    # ------------------------------------------------------------ commit / restore

    def commit(self) -> None:
        """Saves the state in host memory: ``restore()`` comes back here. Cheap (a copy).

        In an elastic job with warm spares, rank 0's first commit also starts them
        in the background (docs/elastic.md).
        """
        self.save()
        spares.after_commit()

    def save(self) -> None:
        """Copies the variables, attributes and this rank's compressor state to host memory."""
        self._saved_attrs = self._attrs_json()
        self._saved_rank_state = (runtime.rank_state() if runtime.is_initialized()
                                  else {})

    def restore(self) -> None:
        """Puts back the last commit: variables, attributes, compressor state (no-op before
        any commit, e.g. on a rank that joined)."""
        if self._saved_attrs is None:
            return
        self._set_attrs(json.loads(self._saved_attrs))
        if self._saved_rank_state is not None and runtime.is_initialized():
            runtime.restore_rank_state(self._saved_rank_state)

    def committed(self) -> bool:
        """Whether this rank has committed (or synced) at least once."""
        return self._saved_attrs is not None

    # ------------------------------------------------------------ sync

    def sync(self) -> None:
        """Collective on the global set: rank 0's state on every rank, then committed.

        Every rank must call it. Variables go by tfdist's broadcasts,
        attributes as rank 0's JSON; see the module's docstring for the
        compressor state.
        """
        self._sync_variables()
        text = self._attrs_json() if runtime.rank() == 0 else None
        received = messages.broadcast_bytes(text.encode() if text is not None else None,
                                            "tfdist.elastic.state.attrs")
        self._set_attrs(json.loads(received.decode()) if received else {})
        self._sync_rank_state()
        self.save()

    def _sync_variables(self) -> None:
        """Subclasses broadcast rank 0's variables here."""

    def _sync_rank_state(self) -> None:
        own = runtime.rank_state()
        shared = {name: value for name, value in own.items()
                  if name.startswith(SHARED_RANK_STATE_PREFIXES)}
        blob = file_format.serialize_arrays(shared) if runtime.rank() == 0 else None
        rank0_shared = file_format.deserialize_arrays(
            messages.broadcast_bytes(blob, "tfdist.elastic.state.rank_state"))
        if runtime.rank() == 0:
            return
        own_parts = {name: value for name, value in own.items()
                     if not name.startswith(SHARED_RANK_STATE_PREFIXES)}
        merged = {**own_parts, **rank0_shared}
        if merged.keys() != own.keys() or any(
                not np.array_equal(merged[name], own[name]) for name in merged):
            runtime.restore_rank_state(merged)

    # ------------------------------------------------------------ attributes

    def _attrs_json(self) -> str:
        values = {name: getattr(self, name) for name in self._attr_names}
        try:
            return json.dumps(values, default=_json_value)
        except (TypeError, ValueError) as error:
            raise TypeError(f"the state's attributes must be JSON values (numbers, strings, "
                            f"lists, dicts with string keys): {error}; attributes "
                            f"{sorted(values)}") from None

    def _set_attrs(self, values: Dict[str, Any]) -> None:
        for name in self._attr_names:
            if name in values:
                setattr(self, name, values[name])

    def __repr__(self) -> str:
        attrs = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._attr_names)
        return f"{type(self).__name__}({attrs})"


class ObjectState(State):
    """A state of plain attributes only (Horovod's name): ``ObjectState(step=0, epoch=0)``.

    Attributes are kept and sent as JSON rather than pickled.
    """


class TensorFlowState(ObjectState):
    """Variables (TensorFlow or Keras) plus attributes: ``TensorFlowState(variables, step=0)``.

    ``commit()`` copies the variables' values into host buffers that are
    kept from one commit to the next (a copy into memory already mapped
    costs about a third of one into fresh memory); ``restore()`` assigns
    them back; ``sync()`` broadcasts rank 0's values, one collective per
    dtype. The variables must be the same (order, shapes, dtypes) on every
    rank.
    """

    def __init__(self, variables: Optional[Sequence[Any]] = None, **attrs: Any) -> None:
        if variables is not None and (not hasattr(variables, "__iter__")
                                      or hasattr(variables, "assign")):
            raise TypeError("variables must be a list of variables (e.g. model.variables), "
                            f"got {type(variables).__name__}")
        self._fixed_variables = list(variables) if variables is not None else []
        for index, variable in enumerate(self._fixed_variables):
            if not hasattr(variable, "assign"):
                raise TypeError(f"variables[{index}] must be a variable (tf.Variable or a "
                                f"Keras variable), got {variable!r} "
                                f"({type(variable).__name__})")
        self._buffers: List[np.ndarray] = []
        super().__init__(**attrs)

    def variables(self) -> List[Any]:
        """The variables this state commits, restores and syncs, in a fixed order."""
        return self._fixed_variables

    def save(self) -> None:
        variables = self.variables()
        buffers = []
        for index, variable in enumerate(variables):
            source = np.asarray(shared_value(variable))  # a view of the tensor: no copy
            if (index < len(self._buffers) and self._buffers[index].shape == source.shape
                    and self._buffers[index].dtype == source.dtype):
                target = self._buffers[index]
            else:
                target = np.empty(source.shape, source.dtype)
            np.copyto(target, source)
            buffers.append(target)
        self._buffers = buffers
        super().save()

    def restore(self) -> None:
        if not self.committed():
            return
        variables = self.variables()
        if len(variables) != len(self._buffers):
            raise ValueError(f"the state has {len(variables)} variables now but committed "
                             f"{len(self._buffers)}: the variables must not change between "
                             "commit and restore")
        for variable, value in zip(variables, self._buffers):
            if tuple(variable.shape) != value.shape:
                raise ValueError(f"variable {_name(variable)} has shape "
                                 f"{tuple(variable.shape)} but {value.shape} was committed")
            variable.assign(value)
        super().restore()

    def _sync_variables(self) -> None:
        _broadcast_from_rank0(self.variables())


def _name(variable: Any) -> str:
    return str(getattr(variable, "path", None) or getattr(variable, "name", "?"))


def _signature(variables: Sequence[Any]) -> List[List[Any]]:
    """Each variable's shape and dtype, to compare rank 0's list with this rank's."""
    return [[list(variable.shape), tf.as_dtype(variable.dtype).name] for variable in variables]


def _broadcast_from_rank0(variables: Sequence[Any]) -> None:
    """Collective: assigns rank 0's values to ``variables`` (local ones excepted) everywhere.

    One broadcast per dtype of all of that dtype's variables, flattened and
    concatenated; named by dtype, not by a per-process count, so that a rank
    that has just joined matches the ranks that have been here all along.
    The ranks first compare their lists with rank 0's and all raise, naming
    the first difference, if they differ (rather than hang in mismatched
    broadcasts).
    """
    if runtime.size() == 1:
        return
    shared = [variable for variable in variables if not is_local(variable)]
    mine = _signature(shared)
    rank0 = messages.broadcast_json(mine, "tfdist.elastic.state.signature")
    problem = ""
    if rank0 != mine:
        if len(rank0) != len(mine):
            problem = f"rank 0 has {len(rank0)} variables to sync, rank {runtime.rank()} {len(mine)}"
        else:
            index = next(i for i, (a, b) in enumerate(zip(rank0, mine)) if a != b)
            problem = (f"variable {index} ({_name(shared[index])}) is {rank0[index]} "
                       f"(shape, dtype) on rank 0 but {mine[index]} on rank {runtime.rank()}")
    if messages.on_any_rank(bool(problem), "tfdist.elastic.state.signature_differs"):
        raise ValueError("State.sync(): the ranks' variables differ"
                         + (f": {problem}" if problem else " (see the rank that differs)")
                         + "; every rank must build the same model and optimizer")
    by_dtype: Dict[str, List[Any]] = {}
    for variable in shared:
        by_dtype.setdefault(tf.as_dtype(variable.dtype).base_dtype.name, []).append(variable)
    for dtype in sorted(by_dtype):
        group = by_dtype[dtype]
        flat = tf.concat([tf.reshape(tf.convert_to_tensor(v), [-1]) for v in group], axis=0)
        received = ops.broadcast(flat, root_rank=0, name=f"tfdist.elastic.state.sync.{dtype}")
        if runtime.rank() == 0:
            continue  # its values are what it sent
        sizes = [int(np.prod(tuple(v.shape), dtype=np.int64)) for v in group]
        for variable, part in zip(group, tf.split(received, sizes, num=len(sizes))):
            variable.assign(tf.reshape(part, tuple(variable.shape)))
