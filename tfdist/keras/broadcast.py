"""Making every rank start from the same state: broadcasting Keras variables from one rank."""
from __future__ import annotations

from typing import Iterable

import tensorflow as tf

from tfdist import ops, runtime
from tfdist.gradient_tape import gradient_names


def broadcast_variables(variables: Iterable, root_rank: int = 0,
                        prefix: str = "tfdist.broadcast") -> None:
    """Overwrites every rank's ``variables`` with ``root_rank``'s values (collective).

    Every rank must pass the same variables in the same order: the
    collectives are named after their positions and the variables' paths.
    Works for Keras and TensorFlow variables of any dtype.
    """
    variables = list(variables)
    if runtime.size() == 1 or not variables:
        return
    for name, variable in zip(gradient_names(variables, len(variables), prefix), variables):
        variable.assign(ops.broadcast(tf.convert_to_tensor(variable), root_rank, name=name))
