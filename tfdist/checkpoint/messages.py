"""What the ranks of a save or restore tell each other: rank 0's bytes or JSON, anyone's flag.

Small collectives, one or two tiny broadcasts or one allreduce each, named
so that every rank matches them. At one rank they return at once.
"""
from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np

from tfdist import ops, runtime


def broadcast_bytes(data: Optional[bytes], name: str) -> bytes:
    """Rank 0's ``data`` on every rank (the others pass None)."""
    if runtime.size() == 1:
        return data or b""
    is_root = runtime.rank() == 0
    length = np.array([len(data) if is_root and data else 0], dtype=np.int64)
    length = int(ops.broadcast(length, root_rank=0, name=f"{name}.length").numpy()[0])
    if length == 0:
        return b""
    payload = (np.frombuffer(data, np.uint8) if is_root else np.zeros(length, np.uint8))
    return ops.broadcast(payload, root_rank=0, name=f"{name}.data").numpy().tobytes()


def broadcast_json(value: Any, name: str) -> Any:
    """Rank 0's JSON-serialisable ``value`` on every rank (the others' is ignored)."""
    text = json.dumps(value).encode() if runtime.rank() == 0 else None
    return json.loads(broadcast_bytes(text, name))


def on_any_rank(flag: bool, name: str) -> bool:
    """True on every rank if ``flag`` is true on any rank."""
    if runtime.size() == 1:
        return flag
    value = np.array([1 if flag else 0], dtype=np.int32)
    return bool(ops.allreduce(value, op=ops.Max, name=name).numpy()[0])
