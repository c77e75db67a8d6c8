"""Local variables in checkpoints: each rank's own value, saved with its per-rank state.

A local variable (tfdist/local_variables.py) is saved twice: in its group,
like every variable (rank 0's value, which restore gives to every rank
first), and in each rank's own state under ``local_variable/<group>/<index>``,
which restore then assigns on that rank. A job restored on another number
of ranks, or from a checkpoint saved before the variable was registered,
keeps rank 0's value everywhere.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy as np

from tfdist.local_variables import is_local

PREFIX = "local_variable/"


def _key(group: str, index: int) -> str:
    return f"{PREFIX}{group}/{index:05d}"


def collect(targets: Mapping[str, List[Any]]) -> Dict[str, np.ndarray]:
    """This rank's values of the local variables among ``targets``, keyed by group and index."""
    return {_key(group, index): np.array(variable.numpy())
            for group, variables in targets.items()
            for index, variable in enumerate(variables) if is_local(variable)}


def restore(state: Dict[str, np.ndarray],
            targets: Mapping[str, List[Any]]) -> Dict[str, np.ndarray]:
    """Assigns the local variables' values found in ``state``; returns the rest of ``state``."""
    rest = {name: value for name, value in state.items() if not name.startswith(PREFIX)}
    for group, variables in targets.items():
        for index, variable in enumerate(variables):
            value = state.get(_key(group, index))
            if value is not None and is_local(variable):
                variable.assign(value)
    return rest
