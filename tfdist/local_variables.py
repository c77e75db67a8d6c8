"""Local variables: per-rank weights whose gradients are not combined across ranks.

A variable registered with ``DistributedGradientTape.register_local_var``,
``DistributedOptimizer.register_local_var`` or through ``local_layers=`` is
marked on the variable object itself (no registry beside the runtime), so
that everything else that handles variables can ask ``is_local``:
``broadcast_variables`` refuses one (broadcasting would overwrite every
rank's own values with the root's), and ``tfdist.checkpoint`` saves and
restores its value per rank.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

_MARK = "_tfdist_local_variable"


def _objects(variable: Any) -> List[Any]:
    # A Keras 3 variable wraps a tf.Variable (``.value``); either may reach
    # broadcast_variables or a checkpoint, so both carry the mark.
    objects = [variable]
    backing = getattr(variable, "value", None)
    if backing is not None and hasattr(backing, "assign") and backing is not variable:
        objects.append(backing)
    return objects


def mark_local(variable: Any) -> None:
    """Marks ``variable`` (TensorFlow or Keras) as holding a per-rank value."""
    if not hasattr(variable, "assign") or not hasattr(variable, "shape"):
        raise TypeError("a local variable must be a TensorFlow or Keras variable, got "
                        f"{type(variable).__name__}")
    for obj in _objects(variable):
        setattr(obj, _MARK, True)


def is_local(variable: Any) -> bool:
    """Whether ``variable`` was registered as local (its value differs between ranks)."""
    return any(getattr(obj, _MARK, False) for obj in _objects(variable))


def _layers(local_layers: Any) -> List[Any]:
    """``local_layers`` (one Keras layer, a list of them, or None) as a checked list."""
    if local_layers is None:
        return []
    import keras  # only here: tfdist itself does not need Keras

    if isinstance(local_layers, keras.layers.Layer):
        return [local_layers]
    try:
        layers = list(local_layers)
    except TypeError:
        raise TypeError("local_layers must be a Keras layer or a list of Keras layers, got "
                        f"{type(local_layers).__name__}") from None
    for layer in layers:
        if not isinstance(layer, keras.layers.Layer):
            raise TypeError("local_layers must be a Keras layer or a list of Keras layers; "
                            f"it holds a {type(layer).__name__}")
    return layers


class LocalVariables:
    """The local variables of one tape or optimizer: registered ones and local layers' weights.

    A layer's weights are looked up whenever they are needed, so a layer
    that is built after it was named (a model built by its first batch)
    still counts. Variables are compared by identity (Keras variables are
    not hashable).
    """

    def __init__(self, local_layers: Any = None) -> None:
        self._layers = _layers(local_layers)
        self._variables: List[Any] = []
        self._derived: List[Tuple[Any, Any]] = []  # (variable, state made for it)
        self.variables()  # marks the weights of layers that are already built

    def register(self, variable: Any) -> None:
        """Adds ``variable`` (and marks it local, with the state that follows it)."""
        mark_local(variable)
        if not any(v is variable for v in self._variables):
            self._variables.append(variable)
        self._mark_derived()

    def follow(self, variable: Any, derived: Any) -> None:
        """Makes ``derived`` (e.g. an optimizer's momentum for ``variable``) local with it."""
        self._derived.append((variable, derived))
        if self.flags([variable])[0]:
            mark_local(derived)

    def _mark_derived(self) -> None:
        flags = self.flags([variable for variable, _ in self._derived])
        for (_, derived), flag in zip(self._derived, flags):
            if flag:
                mark_local(derived)

    def variables(self) -> List[Any]:
        """Every local variable known now (local layers' trainable weights included), marked."""
        found = list(self._variables)
        for layer in self._layers:
            for variable in layer.trainable_weights:
                mark_local(variable)
                found.append(variable)
        return found

    def flags(self, variables: Sequence[Any]) -> List[bool]:
        """For each of ``variables``, whether it is one of these local variables."""
        ids = {id(obj) for v in self.variables() for obj in _objects(v)}
        if not ids:
            return [False] * len(variables)
        return [v is not None and any(id(obj) in ids for obj in _objects(v)) for v in variables]
