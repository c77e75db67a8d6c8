"""Checks of public arguments: each wrong type or value becomes an error that names the
argument and says what it accepts.

The checks are cheap (a type test and a comparison), since some guard eager
collectives whose whole cost is counted in microseconds.
"""
from __future__ import annotations

import numbers
import os
from typing import Any, Collection, Optional

from tfdist._reduce_ops import ReduceOp


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(value: Any, argument: str, minimum: Optional[int] = None) -> int:
    """``value`` as an int (numpy integers too, not bool), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{argument} must be an integer"
                        + (f" >= {minimum}" if minimum is not None else "")
                        + f", got {_shown(value)} ({type(value).__name__})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{argument} must be >= {minimum}, got {value}")
    return int(value)


def optional_integer(value: Any, argument: str, minimum: Optional[int] = None) -> Optional[int]:
    """None, or an int as ``integer`` checks it."""
    return None if value is None else integer(value, argument, minimum)


def number(value: Any, argument: str, positive: bool = False,
           non_negative: bool = False) -> float:
    """``value`` as a float (any real number but bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = "a positive number" if positive else "a number"
        raise TypeError(f"{argument} must be {kind}, got {_shown(value)} "
                        f"({type(value).__name__})")
    result = float(value)
    if positive and not result > 0:
        raise ValueError(f"{argument} must be positive, got {value}")
    if non_negative and not result >= 0:
        raise ValueError(f"{argument} must not be negative, got {value}")
    return result


def boolean(value: Any, argument: str) -> bool:
    """``value`` if it is True or False (numpy's bool too)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"{argument} must be True or False, got {_shown(value)}")


def name(value: Any, argument: str = "name") -> Optional[str]:
    """None or a string."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{argument} must be a string or None, got {_shown(value)} "
                    f"({type(value).__name__})")


def path(value: Any, argument: str) -> str:
    """A non-empty string or os.PathLike, as a string."""
    if isinstance(value, (str, os.PathLike)) and str(value):
        return os.fspath(value)
    raise TypeError(f"{argument} must be a directory path (str or pathlib.Path), "
                    f"got {_shown(value)}")


def rank(value: Any, argument: str, size: int) -> int:
    """A rank of a job of ``size`` ranks."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{argument} must be an integer rank in [0, {size}), "
                        f"got {_shown(value)} ({type(value).__name__})")
    if not 0 <= value < size:
        raise ValueError(f"{argument}={value} is not a rank of this job: expected 0 to "
                         f"{size - 1} (size {size})")
    return int(value)


def reduce_op(value: Any, argument: str = "op", allowed: Optional[Collection[Any]] = None):
    """``value`` as a tfdist.ReduceOp (Sum, Average, Min, Max, Product), one of ``allowed``."""
    choices = list(ReduceOp) if allowed is None else [ReduceOp(a) for a in allowed]
    expected = ", ".join(f"tfdist.{c.name.capitalize()}" for c in choices)
    op = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        try:
            op = ReduceOp(value)
        except ValueError:
            op = None
    if op is None:
        hint = ""
        if isinstance(value, str) and value.upper() in ReduceOp.__members__:
            hint = f" (tfdist.{value.capitalize()}, not the string)"
        raise TypeError(f"{argument}={_shown(value)}: expected one of {expected}{hint}")
    if op not in choices:
        raise ValueError(f"{argument}=tfdist.{op.name.capitalize()} is not accepted here; "
                         f"expected one of {expected}")
    return op
