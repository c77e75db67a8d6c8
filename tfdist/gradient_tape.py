"""Averaging gradients across ranks: ``allreduce_gradients`` and ``DistributedGradientTape``.

``allreduce_gradients`` is the one place that decides how a list of
gradients crosses the ranks; the Keras ``DistributedOptimizer`` and the
``DistributedGradientTape`` both use it, so that both behave the same way:

- dense gradients are allreduced, each under a name derived from its
  position and its variable, so that ranks match them by name whatever the
  order in which their graphs run them, and the runtime's response cache
  recognises them from one step to the next;
- sparse gradients (``tf.IndexedSlices``, e.g. from an Embedding) are
  allgathered (values and indices) unless ``sparse_as_dense`` asks to
  densify them first;
- ``gradient_predivide_factor`` f splits the averaging into a division by f
  before the sum and a multiplication by f/size after it, which keeps large
  float16 sums in range;
- ``None`` gradients stay ``None``.

``allreduce_shared_gradients`` leaves out the gradients of local variables
(tfdist/local_variables.py): those stay on their rank.
"""
from __future__ import annotations

import functools
from typing import Any, List, Optional, Sequence

import tensorflow as tf

from tfdist import _arguments, ops, runtime
from tfdist.compression import Compression, Compressor, as_compressor
from tfdist.compression import _STATELESS as _STATELESS_COMPRESSIONS
from tfdist.local_variables import LocalVariables
from tfdist.process_sets import ProcessSet, check_compressed_set, process_set_id, size_of


def _label(variable) -> str:
    """A readable, rank-independent label for a variable (its Keras path or TF name)."""
    if variable is None:
        return "var"
    label = getattr(variable, "path", None) or getattr(variable, "name", None) or "var"
    return str(label).split(":")[0]


def gradient_names(variables: Optional[Sequence], count: int, prefix: str) -> List[str]:
    """Collective names for ``count`` gradients: ``prefix.index.variable-label``.

    The index makes the names unique even when two variables share a label;
    the label makes timelines and stall messages readable.
    """
    if variables is None:
        return [f"{prefix}.{i}" for i in range(count)]
    return [f"{prefix}.{i}.{_label(v)}" for i, v in enumerate(variables)]


def validate_reduction(op: ops.ReduceOp, gradient_predivide_factor: float,
                       num_groups: Optional[int]) -> None:
    """Raises ValueError if gradients cannot be combined with these settings.

    The one statement of these rules: ``allreduce_gradients`` applies them, and
    ``DistributedGradientTape`` and the Keras ``DistributedSettings`` apply them
    when they are made, so that a bad setting fails there rather than at the
    first step.
    """
    _arguments.reduce_op(op, "op")
    _arguments.number(gradient_predivide_factor, "gradient_predivide_factor", positive=True)
    _arguments.optional_integer(num_groups, "num_groups", minimum=0)
    if gradient_predivide_factor != 1.0 and op != ops.Average:
        raise ValueError("gradient_predivide_factor only applies with op=Average")
    if num_groups is not None and num_groups < 0:
        raise ValueError("num_groups must be >= 0 (or None for the default)")


def _reduction(op: ops.ReduceOp, predivide: float, ranks: int) -> tuple:
    """(op, prescale, postscale) for the runtime, given a valid op and predivide factor,
    over ``ranks`` ranks."""
    if predivide != 1.0:
        return ops.Sum, 1.0 / predivide, predivide / ranks
    return op, 1.0, 1.0


def _gather_sparse(gradient: tf.IndexedSlices, name: str, op: ops.ReduceOp,
                   compression: Compressor,
                   process_set: Optional[ProcessSet] = None) -> tf.IndexedSlices:
    # Every rank's rows, concatenated: applying them adds up the ranks'
    # contributions row by row, which is the sum; divide for the average.
    values, context = compression.compress(gradient.values)
    values = compression.decompress(
        ops.allgather(values, name=f"{name}.values", process_set=process_set), context)
    indices = ops.allgather(gradient.indices, name=f"{name}.indices", process_set=process_set)
    if op == ops.Average:
        values = values / tf.cast(size_of(process_set), values.dtype)
    elif op != ops.Sum:
        raise ValueError(f"sparse gradients can only be summed or averaged, not {op.name}")
    return tf.IndexedSlices(values, indices, gradient.dense_shape)


@functools.lru_cache(maxsize=None)
def default_num_groups() -> int:
    """How gradients are submitted when ``num_groups`` is not given: 1 on CPUs, 0 with GPUs.

    With GPUs, each gradient goes as soon as the backward pass produces it
    (0: one allreduce per gradient, fused by the runtime), so communication
    overlaps the rest of the backward pass, as in Horovod. Without, the
    backward pass and the communication share the same cores, so overlapping
    them only takes cycles from the backward pass; one grouped allreduce
    after it is faster (np=2 on 2 cores: 0.79 of the no-communication
    ceiling for an MLP, against 0.70; docs/training_benchmark.md).
    """
    return 0 if tf.config.list_physical_devices("GPU") else 1


def allreduce_gradients(gradients: Sequence[Optional[tf.Tensor]],
                        variables: Optional[Sequence] = None,
                        prefix: str = "tfdist.grad",
                        op: ops.ReduceOp = ops.Average,
                        compression: Compressor = Compression.none,
                        sparse_as_dense: bool = False,
                        gradient_predivide_factor: float = 1.0,
                        num_groups: Optional[int] = None,
                        process_set: Optional[ProcessSet] = None,
                        iteration: Optional[tf.Tensor] = None) -> List[Optional[tf.Tensor]]:
    """Returns the gradients combined across ranks (averaged by default).

    ``variables`` (same length as ``gradients``, or None) only name the
    collectives. ``num_groups`` > 0 splits the dense gradients into that many
    contiguous groups, each submitted as one grouped allreduce; 0 submits
    them one by one (the runtime fuses small ones either way); None (the
    default) is ``default_num_groups()``. ``process_set`` (a registered
    ``tfdist.ProcessSet``; None: the global set) combines them over its ranks
    only.
    ``iteration``: the training step's number, the same on every rank (an
    optimizer's ``iterations``). Given, with autotuning on
    (``TFDIST_AUTOTUNE``), ``num_groups`` None, the global set and no or a
    16-bit compression, the step is built with several groupings and
    autotuning chooses among them while training runs (docs/runtime.md,
    "Autotuning").
    Works eagerly and inside ``tf.function``. With one rank, returns the
    gradients unchanged (no collective is needed).
    """
    validate_reduction(op, gradient_predivide_factor, num_groups)
    check_compressed_set(compression, process_set, "allreduce_gradients")
    extra = {} if process_set is None else {"process_set": process_set}
    ranks = size_of(process_set)
    gradients = list(gradients)
    if ranks == 1 and gradient_predivide_factor == 1.0:
        return [None if g is None else (tf.convert_to_tensor(g) if sparse_as_dense and
                                        isinstance(g, tf.IndexedSlices) else g)
                for g in gradients]
    names = gradient_names(variables, len(gradients), prefix)
    reduce_op, prescale, postscale = _reduction(ops.ReduceOp(op), gradient_predivide_factor,
                                                ranks)
    result: List[Optional[tf.Tensor]] = [None] * len(gradients)
    dense_indices: List[int] = []
    for i, gradient in enumerate(gradients):
        if gradient is None:
            continue
        if isinstance(gradient, tf.IndexedSlices):
            if sparse_as_dense:
                gradients[i] = tf.convert_to_tensor(gradient)
            else:
                result[i] = _gather_sparse(gradient, names[i], ops.ReduceOp(op), compression,
                                           process_set)
                continue
        dense_indices.append(i)

    if not dense_indices:
        return result

    def reduce_dense(groups: int) -> List[tf.Tensor]:
        return _reduce_dense([gradients[i] for i in dense_indices],
                             [names[i] for i in dense_indices], groups, prefix, compression,
                             reduce_op, prescale, postscale, extra)

    candidates = _tuned_group_candidates(num_groups, len(dense_indices), iteration,
                                         compression, process_set)
    if len(candidates) > 1:
        # Every candidate's collectives are traced, under their own names;
        # each step runs the one autotuning chose for its iteration, the same
        # branch on every rank (cc/core/runtime/gradient_groups_schedule.h).
        index = ops.gradient_groups_index(iteration, candidates)
        reduced = tf.switch_case(index, [functools.partial(reduce_dense, groups)
                                         for groups in candidates])
    else:
        reduced = reduce_dense(candidates[0])
    for i, value in zip(dense_indices, reduced):
        result[i] = value
    return result


def _reduce_dense(gradients: List[tf.Tensor], names: List[str], num_groups: int, prefix: str,
                  compression: Compressor, reduce_op: ops.ReduceOp, prescale: float,
                  postscale: float, extra: dict) -> List[tf.Tensor]:
    """Dense ``gradients`` allreduced as ``num_groups`` grouped calls (0: one by one)."""
    if num_groups == 0:
        return list(compression.allreduce(gradients, names, op=reduce_op,
                                          prescale_factor=prescale, postscale_factor=postscale,
                                          **extra))
    reduced: List[tf.Tensor] = []
    groups = _split(list(range(len(gradients))), num_groups)
    for number, group in enumerate(groups):
        reduced.extend(compression.allreduce(
            [gradients[i] for i in group], [names[i] for i in group], op=reduce_op,
            prescale_factor=prescale, postscale_factor=postscale,
            group_name=f"{prefix}.group{number}of{len(groups)}", **extra))
    return reduced


#: The grouping autotuning tries besides the default, per default: on CPUs
#: one group or two (submitting one by one is slower there, since overlap
#: only takes cycles from the backward pass), with GPUs one by one or one
#: group. One alternative each keeps the search within its step budget.
_TUNED_GROUPS = {1: 2, 0: 1}


def _tuned_group_candidates(num_groups: Optional[int], dense: int,
                            iteration: Optional[tf.Tensor], compression: Compressor,
                            process_set: Optional[ProcessSet]) -> List[int]:
    """The num_groups values to build the step with, the default first; one where
    autotuning does not choose the grouping."""
    default = default_num_groups() if num_groups is None else num_groups
    if (num_groups is not None or iteration is None or process_set is not None
            or compression.name not in _STATELESS_COMPRESSIONS
            or not runtime.autotuning()):
        return [default]
    # More groups than gradients group alike.
    alternative = min(_TUNED_GROUPS.get(default, 1), dense)
    return [default] if alternative == default else [default, alternative]


def allreduce_shared_gradients(gradients: Sequence[Optional[tf.Tensor]],
                               variables: Optional[Sequence],
                               local: LocalVariables,
                               scale_local_gradients: bool = True,
                               op: ops.ReduceOp = ops.Average,
                               **settings: Any) -> List[Optional[tf.Tensor]]:
    """``allreduce_gradients`` for every gradient but those of ``local``'s variables.

    A local variable's gradient stays this rank's own. With
    ``scale_local_gradients`` and ``op=Average`` it is divided by the number
    of ranks, as Horovod does, so that every variable's update is scaled as
    if the ranks' losses were averaged. ``settings`` are
    ``allreduce_gradients``' other keyword arguments. Without local variables
    this is ``allreduce_gradients`` itself, with the same collective names.
    """
    gradients = list(gradients)
    flags = local.flags(variables) if variables is not None else [False] * len(gradients)
    if not any(flags):
        return allreduce_gradients(gradients, variables, op=op, **settings)
    shared = [i for i, flag in enumerate(flags) if not flag]
    reduced = allreduce_gradients([gradients[i] for i in shared],
                                  [variables[i] for i in shared], op=op, **settings)
    result = list(gradients)
    for i, value in zip(shared, reduced):
        result[i] = value
    ranks = size_of(settings.get("process_set"))
    if scale_local_gradients and ops.ReduceOp(op) == ops.Average and ranks > 1:
        for i, flag in enumerate(flags):
            if flag and result[i] is not None:
                result[i] = _divided(result[i], ranks)
    return result


def _divided(gradient, divisor: int):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values / tf.cast(divisor, gradient.values.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient / tf.cast(divisor, gradient.dtype)


def _split(items: List[int], parts: int) -> List[List[int]]:
    """``items`` in at most ``parts`` contiguous, nearly equal, non-empty groups."""
    parts = min(parts, len(items))
    size, extra = divmod(len(items), parts)
    groups, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        groups.append(items[start:end])
        start = end
    return groups


class DistributedGradientTape:
    """Wraps a ``tf.GradientTape`` so that ``gradient()`` returns cross-rank averages.

        with tf.GradientTape() as tape:
            loss = ...
        tape = tfdist.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)

    Everything else (``watch``, ``jacobian``, the context manager) is the
    wrapped tape's. The collective names come from the sources' positions and
    names, so every rank must ask for the gradients of the same sources.

    Local variables (``local_layers``' trainable weights, and variables
    given to ``register_local_var``) keep this rank's own gradient, divided
    by the number of ranks when ``scale_local_gradients`` and
    ``op=Average`` (Horovod's rule). Every rank must register the same
    variables.

    ``process_set`` (a registered ``tfdist.ProcessSet``) averages over its
    ranks only: e.g. one model replica per set.
    """

    def __init__(self, tape: tf.GradientTape, op: ops.ReduceOp = ops.Average,
                 compression: Compressor = Compression.none, sparse_as_dense: bool = False,
                 gradient_predivide_factor: float = 1.0, num_groups: Optional[int] = None,
                 name: str = "tfdist.tape", local_layers: Any = None,
                 scale_local_gradients: bool = True,
                 process_set: Optional[ProcessSet] = None) -> None:
        if not isinstance(tape, tf.GradientTape):
            raise TypeError("tape must be a tf.GradientTape (used as `with tf.GradientTape() "
                            f"as tape:`), got {type(tape).__name__}")
        op = _arguments.reduce_op(op, "op")
        compression = as_compressor(compression)
        _arguments.boolean(sparse_as_dense, "sparse_as_dense")
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        validate_reduction(op, gradient_predivide_factor, num_groups)
        _arguments.boolean(scale_local_gradients, "scale_local_gradients")
        process_set_id(process_set, "DistributedGradientTape")  # registered, or TypeError
        check_compressed_set(compression, process_set, "DistributedGradientTape")
        self._process_set = process_set
        self._local = LocalVariables(local_layers)
        self._scale_local_gradients = scale_local_gradients
        self._tape = tape
        self._op = op
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self._predivide = gradient_predivide_factor
        self._num_groups = num_groups
        self._name = name

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        """The wrapped tape's gradients, combined across ranks, in the structure of ``sources``."""
        local = self._tape.gradient(target, sources, output_gradients=output_gradients,
                                    unconnected_gradients=unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_local = tf.nest.flatten(local, expand_composites=False)
        reduced = allreduce_shared_gradients(
            flat_local, flat_sources, self._local, self._scale_local_gradients,
            prefix=self._name, op=self._op,
            compression=self._compression, sparse_as_dense=self._sparse_as_dense,
            gradient_predivide_factor=self._predivide, num_groups=self._num_groups,
            process_set=self._process_set)
        return tf.nest.pack_sequence_as(local, reduced) if local is not None else None

    def register_local_var(self, variable) -> None:
        """Keeps ``variable``'s gradient on this rank (not combined across ranks)."""
        self._local.register(variable)

    def register_local_source(self, source) -> None:
        """Horovod's name for ``register_local_var``."""
        self._local.register(source)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, attribute: str):
        # watch(), stop_recording(), jacobian(), ... are the wrapped tape's.
        return getattr(self._tape, attribute)


def PartialDistributedGradientTape(tape: tf.GradientTape, local_layers: Any = None,
                                   **kwargs: Any) -> DistributedGradientTape:
    """Horovod's name: a ``DistributedGradientTape`` whose ``local_layers`` keep their gradients.

    ``local_layers``: a Keras layer or a list of them, whose trainable
    weights are local variables; the other arguments are
    ``DistributedGradientTape``'s.
    """
    return DistributedGradientTape(tape, local_layers=local_layers, **kwargs)
