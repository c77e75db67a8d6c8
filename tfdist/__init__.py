"""tfdist: data-parallel training for TensorFlow and Keras over MPI, with Horovod's API.

    import tfdist
    tfdist.init()
    total = tfdist.allreduce(tf.ones(3) * tfdist.rank(), op=tfdist.Sum)

The API (tfdist/_api.py: TensorFlow, the native library, the ops' gradients)
is loaded the first time one of its names is used (PEP 562), so that
``import tfdist.checkpoint.file_format`` and the launcher's imports of
tfdist.config stay free of TensorFlow. That first use fails, saying how to
rebuild, when the native library is missing or was built for another
TensorFlow; ``import tfdist.keras`` uses the API at once, so it fails at
import.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "Adasum", "Average", "ConfigError", "InitError", "Max", "Min", "NotInitializedError",
    "PartialDistributedGradientTape", "ProcessSet", "Product", "ReduceOp", "RuntimeSettings",
    "Sum", "add_process_set", "algorithm_for", "allgather", "allgather_object", "allreduce",
    "alltoall", "barrier", "broadcast", "broadcast_object", "broadcast_variables",
    "cross_rank", "cross_size", "default_num_groups", "global_process_set",
    "grouped_allgather", "grouped_allreduce", "grouped_reducescatter", "init",
    "is_initialized", "is_local_variable", "join", "link_cost", "local_rank", "local_rank_op",
    "local_size", "local_size_op", "rank", "rank_op", "reducescatter", "remove_process_set",
    "shutdown", "size", "size_op", "stats",
]
# Public beyond __all__ (not re-exported by ``from tfdist import *``).
_ALSO_PUBLIC = ("Compression", "DistributedGradientTape", "checkpoint", "elastic")


def _load_api() -> None:
    """Imports tfdist/_api.py and copies its public names here."""
    api = importlib.import_module("tfdist._api")
    globals().update({name: getattr(api, name) for name in (*__all__, *_ALSO_PUBLIC)})


def __getattr__(name: str) -> Any:
    # Other names (submodules among them: ``from tfdist import ops`` asks
    # here first) must not load the API.
    if name not in __all__ and name not in _ALSO_PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load_api()
    return globals()[name]
