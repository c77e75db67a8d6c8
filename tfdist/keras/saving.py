"""``load_model``: restores a ``.keras`` model with its optimizer wrapped in DistributedOptimizer."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Sequence, Type, Union

import keras

from tfdist.compression import Compressor, as_compressor
from tfdist.keras.optimizer import DistributedOptimizerMixin, distributed_custom_objects


def load_model(filepath: str,
               custom_optimizers: Sequence[Type[keras.optimizers.Optimizer]] = (),
               custom_objects: Optional[Dict[str, Any]] = None,
               compression: Optional[Union[Compressor, str]] = None,
               compile: bool = True) -> keras.Model:  # noqa: A002  (Keras' own name)
    """``keras.models.load_model`` whose optimizer comes back as a DistributedOptimizer.

    Works for models saved with or without the wrapper: every Keras
    optimizer class (and each of ``custom_optimizers``) is mapped to its
    distributed subclass while loading, so the optimizer's saved state
    (iterations, momenta) is restored into the wrapped optimizer. The
    tfdist settings saved with the model are kept; ``compression``, if given (a
    compressor or its name, as DistributedOptimizer takes it), replaces the saved one.
    """
    if compression is not None:
        compression = as_compressor(compression)
    objects = distributed_custom_objects(custom_optimizers)
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects, compile=compile)
    optimizer = getattr(model, "optimizer", None)
    if compression is not None and isinstance(optimizer, DistributedOptimizerMixin):
        optimizer._tfdist_settings = dataclasses.replace(optimizer.distributed_settings,
                                                         compression=compression)
    return model
