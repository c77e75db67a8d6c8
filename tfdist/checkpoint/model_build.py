"""Builds a Keras model that is not built yet from what its checkpoint records.

A ``Sequential`` without an ``Input`` (and a subclassed model) has no
variables until Keras builds it in the first step of ``fit``, after
``on_train_begin``, where BackupAndRestore restores. A checkpoint therefore
records the model's input (``get_build_config()``'s ``input_shape``, and
the input dtype where the model knows it), and restore builds the model
from it the way Keras' own ``fit`` does: a call on symbolic inputs, which
creates every variable under the model's name scope and computes nothing.
Then the optimizer can be built for the right variables, and the values
assigned.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in value)


def _input_dtype(model: Any) -> Optional[str]:
    """The dtype of the model's inputs if it has symbolic ones of one dtype
    (Sequential, functional models); else None."""
    try:
        inputs = list(model.inputs or [])
    except (AttributeError, ValueError, TypeError):
        return None
    dtypes = {str(getattr(i, "dtype", "")) for i in inputs}
    return dtypes.pop() if len(dtypes) == 1 and "" not in dtypes else None


def config(model: Any) -> Optional[Dict[str, Any]]:
    """What restore needs to build ``model``: its input shape (and dtype), as JSON; None if
    ``model`` is not a built Keras model that can say."""
    get = getattr(model, "get_build_config", None)
    if get is None or not getattr(model, "built", False):
        return None
    try:
        build = json.loads(json.dumps(get()))
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        return None
    if not isinstance(build, dict) or build.get("input_shape") is None:
        return None  # a functional model (always built), or one built without a shape
    result = {"input_shape": build["input_shape"]}
    dtype = _input_dtype(model)
    if dtype is not None:
        result["input_dtype"] = dtype
    return result


def _symbolic(shape: Any, dtype: str) -> Any:
    import keras
    if _is_shape(shape):
        return keras.KerasTensor(tuple(shape), dtype=dtype)
    if isinstance(shape, dict):
        return {key: _symbolic(value, dtype) for key, value in shape.items()}
    if isinstance(shape, (list, tuple)):
        return [_symbolic(value, dtype) for value in shape]
    raise ValueError(f"an input shape of {shape!r}")


def build(model: Any, recorded: Dict[str, Any]) -> str:
    """Builds the unbuilt ``model`` from ``recorded`` (what ``config`` gave); "" once built,
    else why not."""
    try:
        model(_symbolic(recorded["input_shape"], recorded.get("input_dtype", "float32")))
    except Exception as error:  # noqa: BLE001  (every rank must learn of it, not just raise)
        return (f"the model is not built, and building it for the input the checkpoint "
                f"records ({recorded}) failed: {type(error).__name__}: {error}; build it "
                f"before restoring")
    if not getattr(model, "built", True):
        return (f"the model is not built, and calling it on the input the checkpoint records "
                f"({recorded}) did not build it; build it before restoring")
    return ""
