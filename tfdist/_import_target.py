"""Which tfdist module an import statement asked for.

Python runs a package's ``__init__`` before any of its submodules and does
not tell it which one is wanted. ``import tfdist`` must load TensorFlow and
the native library (and fail, saying how to rebuild, when the library is
missing or stale), while the checkpoint file format must stay readable by
tools that have neither. The import system's own frames name the modules
being imported (``importlib._bootstrap._find_and_load(name, ...)``); the
outermost tfdist one is what the statement asked for. Where those frames
cannot be read, the answer is None and tfdist loads everything, as before.

This module imports nothing but the standard library.
"""
from __future__ import annotations

import sys
from typing import Optional

#: Modules that import neither TensorFlow nor the library, and whose import
#: therefore does not load tfdist's API.
TF_FREE_MODULES = frozenset({"tfdist.checkpoint.direct_io", "tfdist.checkpoint.file_format"})


def requested_module() -> Optional[str]:
    """The tfdist module the running import statement named, or None if unknown."""
    requested = None
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_find_and_load" and code.co_filename.startswith("<frozen importlib"):
            name = frame.f_locals.get("name")
            if isinstance(name, str) and (name == "tfdist" or name.startswith("tfdist.")):
                requested = name  # frames run innermost first: keep the outermost
        frame = frame.f_back
    return requested


def loads_api() -> bool:
    """Whether the running import needs tfdist's API (False only for TF_FREE_MODULES)."""
    return requested_module() not in TF_FREE_MODULES
