"""``DistributedOptimizer``: any Keras 3 optimizer, with gradients averaged across ranks.

Keras 3 routes every update through ``Optimizer.apply(grads, variables)``:
``model.fit`` calls ``apply_gradients``, which calls ``apply``; custom loops
call one or the other; ``LossScaleOptimizer.apply`` is the same entry point.
So the wrapper overrides ``apply`` and nothing else on the update path: the
gradients are averaged there, before Keras unscales, clips
(clipnorm/clipvalue/global_clipnorm), decays and applies them. No private
hook that Keras might stop calling is involved, and there is no path on
which the gradients reach the update unaveraged.

The wrapper is a subclass of the optimizer's own class, made on the fly and
cached per class, so ``isinstance(opt, keras.optimizers.Adam)`` still holds
and the saved config names the original class (with tfdist's settings added).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Type

import keras
import tensorflow as tf

from tfdist import _arguments, ops
from tfdist.compression import Compression, Compressor, as_compressor
from tfdist.gradient_tape import allreduce_shared_gradients, validate_reduction
from tfdist.local_variables import LocalVariables
from tfdist.process_sets import ProcessSet, check_compressed_set, process_set_id

# The settings DistributedOptimizer adds to the optimizer's config, with defaults.
_SETTING_DEFAULTS: Dict[str, Any] = {
    "compression": "none",
    "op": "Average",
    "backward_passes_per_step": 1,
    "average_aggregated_gradients": False,
    "sparse_as_dense": False,
    "gradient_predivide_factor": 1.0,
    "num_groups": None,
}


@dataclasses.dataclass(frozen=True)
class DistributedSettings:
    """How a DistributedOptimizer combines gradients; see ``DistributedOptimizer``."""

    compression: Compressor = Compression.none
    op: ops.ReduceOp = ops.Average
    backward_passes_per_step: int = 1
    average_aggregated_gradients: bool = False
    sparse_as_dense: bool = False
    gradient_predivide_factor: float = 1.0
    num_groups: Optional[int] = None

    def __post_init__(self) -> None:
        _arguments.integer(self.backward_passes_per_step, "backward_passes_per_step", minimum=1)
        _arguments.reduce_op(self.op, "op", allowed=(ops.Average, ops.Sum, ops.Adasum))
        _arguments.boolean(self.average_aggregated_gradients, "average_aggregated_gradients")
        _arguments.boolean(self.sparse_as_dense, "sparse_as_dense")
        validate_reduction(self.op, self.gradient_predivide_factor, self.num_groups)

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "DistributedSettings":
        """Pops the settings out of an optimizer config (leaving the optimizer's own keys)."""
        values = {key: config.pop(key, default) for key, default in _SETTING_DEFAULTS.items()}
        compression = values["compression"]
        op = values["op"]
        return cls(
            compression=(compression if isinstance(compression, Compressor)
                         else Compression.from_config(compression)),
            op=op if isinstance(op, ops.ReduceOp) else ops.ReduceOp[str(op).upper()],
            backward_passes_per_step=int(values["backward_passes_per_step"]),
            average_aggregated_gradients=bool(values["average_aggregated_gradients"]),
            sparse_as_dense=bool(values["sparse_as_dense"]),
            gradient_predivide_factor=float(values["gradient_predivide_factor"]),
            num_groups=None if values["num_groups"] is None else int(values["num_groups"]))

    def to_config(self) -> Dict[str, Any]:
        """JSON-serialisable form, merged into the optimizer's ``get_config()``."""
        return {
            # A bare name when that is all there is, as older saves have it.
            "compression": (self.compression.name if self.compression.get_config()
                            == {"name": self.compression.name}
                            else self.compression.get_config()),
            "op": ops.ReduceOp(self.op).name.capitalize(),
            "backward_passes_per_step": self.backward_passes_per_step,
            "average_aggregated_gradients": self.average_aggregated_gradients,
            "sparse_as_dense": self.sparse_as_dense,
            "gradient_predivide_factor": self.gradient_predivide_factor,
            "num_groups": self.num_groups,
        }


class _LocalAccumulator:
    """Local sums of gradients for backward_passes_per_step > 1.

    Plain ``tf.Variable``s held outside Keras' tracking: they are scratch
    state, not part of the optimizer that a ``.keras`` file should carry, so
    a model trained with accumulation still loads into a plain optimizer.
    """

    def __init__(self, variables: Sequence) -> None:
        self.sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                 name="tfdist_gradient_sum") for v in variables]
        self.passes = tf.Variable(0, dtype=tf.int64, trainable=False, name="tfdist_passes")


def inside_xla_compilation() -> bool:
    """True while tracing a function that XLA will compile (jit_compile=True)."""
    if tf.executing_eagerly():
        return False
    try:  # TensorFlow has no public API for this question.
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


XLA_MESSAGE = ("tfdist's collectives are CPU kernels without an XLA implementation, so the "
               "gradients cannot be averaged inside an XLA-compiled train step. Compile the "
               "model with jit_compile=False, or pass any tfdist.keras callback to fit() "
               "(it turns XLA off for the train step).")


class DistributedOptimizerMixin:
    """The part of every DistributedOptimizer subclass that tfdist adds."""

    _tfdist_base: Type[keras.optimizers.Optimizer]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = DistributedSettings.from_config(kwargs)
        super().__init__(*args, **kwargs)
        self._tfdist_settings = settings
        self._tfdist_accumulator: Optional[_LocalAccumulator] = None
        self._tfdist_local = LocalVariables()
        self._tfdist_scale_local_gradients = True
        # Not in the config (a set is not serializable): pass it again after loading.
        self._tfdist_process_set: Optional[ProcessSet] = None
        inner = getattr(self, "inner_optimizer", None)
        if isinstance(inner, DistributedOptimizerMixin):
            # A LossScaleOptimizer restored with the distributed classes in
            # custom_objects gets a distributed inner optimizer too; averaging
            # twice would be wasted work, so keep the inner one plain.
            self.inner_optimizer = undistributed(inner)

    @property
    def distributed_settings(self) -> DistributedSettings:
        """How this optimizer combines gradients across ranks."""
        return self._tfdist_settings

    def get_config(self) -> Dict[str, Any]:
        # Only settings that differ from the defaults are added: a model saved
        # with default settings then loads with plain keras.models.load_model
        # too (for inference, on one process), and hvd.load_model restores
        # the wrapper either way.
        config = super().get_config()
        config.update({key: value for key, value in self._tfdist_settings.to_config().items()
                       if value != _SETTING_DEFAULTS[key]})
        return config

    # Local variables (tfdist/local_variables.py): their gradients stay on
    # their rank, and so do the optimizer variables made for them (momenta),
    # which are marked local too so that checkpoints keep them per rank.

    def register_local_var(self, variable: Any) -> None:
        """Keeps ``variable``'s gradient (and its optimizer state) on this rank."""
        self._tfdist_local.register(variable)

    def add_variable_from_reference(self, reference_variable: Any, *args: Any, **kwargs: Any):
        slot = super().add_variable_from_reference(reference_variable, *args, **kwargs)
        self._tfdist_local.follow(reference_variable, slot)
        return slot

    def build(self, variables: Sequence) -> None:
        super().build(variables)
        if self._tfdist_settings.backward_passes_per_step > 1 and self._tfdist_accumulator is None:
            with tf.init_scope():  # created once, outside any function being traced
                self._tfdist_accumulator = _LocalAccumulator(list(variables))

    def apply(self, grads: Sequence, trainable_variables: Optional[Sequence] = None):
        grads = list(grads)
        if not grads:
            return super().apply(grads, trainable_variables)
        if inside_xla_compilation():
            raise RuntimeError(XLA_MESSAGE)
        variables = None if trainable_variables is None else list(trainable_variables)
        if self._tfdist_settings.backward_passes_per_step == 1:
            return super().apply(self._allreduce(grads, variables), variables)
        return self._apply_every_nth_pass(grads, variables)

    def _allreduce(self, grads: List, variables: Optional[List]) -> List:
        settings = self._tfdist_settings
        if variables is None and self._tfdist_local.variables() and self.built:
            variables = list(self._trainable_variables)  # what Keras applies them to
        return allreduce_shared_gradients(
            grads, variables, self._tfdist_local, self._tfdist_scale_local_gradients,
            prefix=f"tfdist.{self.name}", op=settings.op,
            compression=settings.compression, sparse_as_dense=settings.sparse_as_dense,
            gradient_predivide_factor=settings.gradient_predivide_factor,
            num_groups=settings.num_groups, process_set=self._tfdist_process_set,
            iteration=self.iterations)

    def _apply_every_nth_pass(self, grads: List, variables: Optional[List]) -> None:
        # Sum locally for N passes, then average across ranks once and apply.
        # Every rank counts the same passes, so all take the same branch.
        if not self.built:
            if variables is None:
                raise ValueError("the optimizer must be built, or given the variables")
            with keras.name_scope(self.name, caller=self):
                self.build(variables)
            self.built = True
        accumulator = self._tfdist_accumulator
        if variables is None:
            known = list(self._trainable_variables)
        else:
            known = variables
        if len(known) != len(accumulator.sums):
            raise ValueError("backward_passes_per_step needs the same variables on every call")
        for grad, total in zip(grads, accumulator.sums):
            if grad is not None:
                total.assign_add(tf.cast(tf.convert_to_tensor(grad), total.dtype))
        passes = accumulator.passes.assign_add(1)
        steps = self._tfdist_settings.backward_passes_per_step
        divisor = float(steps) if self._tfdist_settings.average_aggregated_gradients else 1.0

        def reduce_and_apply() -> None:
            summed = [None if g is None else total.read_value() / divisor
                      for g, total in zip(grads, accumulator.sums)]
            super(DistributedOptimizerMixin, self).apply(self._allreduce(summed, variables),
                                                         variables)
            for total in accumulator.sums:
                total.assign(tf.zeros_like(total))

        tf.cond(tf.equal(passes % steps, 0), reduce_and_apply, lambda: None)


_CLASSES: Dict[type, type] = {}


def distributed_class(base: Type[keras.optimizers.Optimizer]) -> type:
    """The DistributedOptimizer subclass of ``base`` (made once per class).

    It keeps ``base``'s name and module, so that configs and saved models
    name the original optimizer class.
    """
    if issubclass(base, DistributedOptimizerMixin):
        return base
    if base not in _CLASSES:
        _CLASSES[base] = type(base.__name__, (DistributedOptimizerMixin, base), {
            "__module__": base.__module__,
            "__qualname__": base.__qualname__,
            "__doc__": f"{base.__name__} whose gradients are averaged across tfdist ranks.",
            "_tfdist_base": base,
        })
    return _CLASSES[base]


def undistributed(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
    """A plain optimizer of the wrapped class, with the same config (fresh state)."""
    if not isinstance(optimizer, DistributedOptimizerMixin):
        return optimizer
    config = optimizer.get_config()
    DistributedSettings.from_config(config)
    return optimizer._tfdist_base.from_config(config)


def DistributedOptimizer(optimizer: keras.optimizers.Optimizer,
                         name: Optional[str] = None,
                         compression: Compressor = Compression.none,
                         op: ops.ReduceOp = ops.Average,
                         backward_passes_per_step: int = 1,
                         average_aggregated_gradients: bool = False,
                         sparse_as_dense: bool = False,
                         gradient_predivide_factor: float = 1.0,
                         num_groups: Optional[int] = None,
                         local_layers: Any = None,
                         scale_local_gradients: bool = True,
                         process_set: Optional[ProcessSet] = None) -> keras.optimizers.Optimizer:
    """Returns ``optimizer`` made data-parallel: gradients are averaged across ranks before use.

    The result is an instance of the optimizer's own class, configured like
    it (it is made from ``optimizer.get_config()``, so wrap before training:
    optimizer state such as momenta is not carried over). For mixed
    precision, wrap the ``LossScaleOptimizer`` (not the other way round), so
    that every rank sees the same averaged gradients when it decides whether
    they are finite.

    Args:
      optimizer: any Keras 3 optimizer.
      name: the optimizer's name (default: keep it).
      compression: a ``tfdist.Compression`` compressor (``none``, ``fp16``, ``bf16``,
        ``topk(ratio)``, ``powersgd(rank)``) or its name ("none", "fp16", "bf16",
        "powersgd").
      op: ``Average`` (default), ``Sum``, or ``Adasum`` (adaptive summation,
        for a learning rate not scaled by the number of ranks; docs/adasum.md).
      backward_passes_per_step: apply (and communicate) once every N calls,
        with the local sum of the N gradients.
      average_aggregated_gradients: divide that local sum by N.
      sparse_as_dense: densify IndexedSlices gradients and allreduce them,
        instead of allgathering their rows.
      gradient_predivide_factor: divide by f before summing and by size/f
        after, instead of by size after.
      num_groups: submit the gradients as this many grouped allreduces (0:
        one by one; None: ``tfdist.default_num_groups()``, 1 on CPUs, 0 with
        GPUs).
      local_layers: a Keras layer or a list of them whose trainable weights
        are local: their gradients are not combined across ranks (per-rank
        heads, embeddings). ``register_local_var(variable)`` adds one more.
        Neither is saved in the optimizer's config: register them again
        after loading a model.
      scale_local_gradients: with ``op=Average``, divide local gradients by
        the number of ranks, as Horovod does (the update then has the scale
        of the averaged ones).
      process_set: a registered ``tfdist.ProcessSet``: average over its ranks
        only (one model replica per set). Not saved in the config.
    """
    if isinstance(optimizer, DistributedOptimizerMixin):
        raise ValueError("the optimizer is already a DistributedOptimizer")
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError("optimizer must be a Keras 3 optimizer (e.g. "
                        f"keras.optimizers.Adam(1e-3)), got {type(optimizer).__name__}")
    _arguments.name(name)
    settings = DistributedSettings(
        compression=as_compressor(compression),
        op=_arguments.reduce_op(op, "op", allowed=(ops.Average, ops.Sum, ops.Adasum)),
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients,
        sparse_as_dense=sparse_as_dense, gradient_predivide_factor=gradient_predivide_factor,
        num_groups=num_groups)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    config.update(settings.to_config())
    distributed = distributed_class(type(optimizer)).from_config(config)
    _arguments.boolean(scale_local_gradients, "scale_local_gradients")
    distributed._tfdist_local = LocalVariables(local_layers)
    distributed._tfdist_scale_local_gradients = scale_local_gradients
    process_set_id(process_set, "DistributedOptimizer")  # registered, or an error
    check_compressed_set(settings.compression, process_set, "DistributedOptimizer")
    distributed._tfdist_process_set = process_set
    return distributed


def PartialDistributedOptimizer(optimizer: keras.optimizers.Optimizer, local_layers: Any = None,
                                **kwargs: Any) -> keras.optimizers.Optimizer:
    """Horovod's name: a ``DistributedOptimizer`` whose ``local_layers`` keep their gradients.

    The other arguments are ``DistributedOptimizer``'s.
    """
    return DistributedOptimizer(optimizer, local_layers=local_layers, **kwargs)


def distributed_custom_objects(
        extra: Sequence[Type[keras.optimizers.Optimizer]] = ()) -> Dict[str, type]:
    """Maps every Keras optimizer class name (and ``extra``'s) to its distributed subclass."""
    classes = [value for value in vars(keras.optimizers).values()
               if isinstance(value, type) and issubclass(value, keras.optimizers.Optimizer)]
    classes.extend(extra)
    return {cls.__name__: distributed_class(cls) for cls in classes}


