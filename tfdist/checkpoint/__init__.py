"""Checkpoints that survive crashes: ``tfdist.checkpoint.save``, ``restore``, ``latest``, ``wait``.

The API (tfdist/checkpoint/_api.py, which says how to use it) needs
TensorFlow and is imported the first time one of its names is used
(PEP 562), so that ``import tfdist.checkpoint.file_format``, the file
format alone, imports neither TensorFlow nor the native library.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CheckpointError", "PREEMPTED_EXIT_CODE", "Restored", "latest", "preempted",
           "restart_count", "restore", "save", "wait"]


def __getattr__(name: str) -> Any:
    # Other names (submodules among them: ``from tfdist.checkpoint import
    # direct_io`` asks here first) must not import the API.
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    api = importlib.import_module("tfdist.checkpoint._api")
    globals().update({public: getattr(api, public) for public in __all__})
    return globals()[name]
