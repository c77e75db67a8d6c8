"""Evaluates the rows of tests/mpi/test_argument_errors.py at np = 1 and writes what each raised.

argv: the rows' JSON file, the result file. Each row is an expression; the
result is {id: [exception class name, message]} (["ok", repr(value)] if none).
"""
import json
import sys
import tempfile

import keras
import numpy as np
import tensorflow as tf

import tfdist
import tfdist.keras as hvd
from tfdist.config import RuntimeSettings
from mpi_harness import worker_main


def body() -> None:
    tfdist.init()
    assert tfdist.size() == 1
    rows = json.loads(open(sys.argv[1]).read())
    directory = tempfile.mkdtemp(prefix="tfdist-args-")
    namespace = {"tfdist": tfdist, "hvd": hvd, "tf": tf, "keras": keras, "np": np,
                 "RuntimeSettings": RuntimeSettings, "x": tf.ones([2]),
                 "tape": tf.GradientTape(), "SGD": keras.optimizers.SGD,
                 "directory": directory,
                 "model": keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])}
    results = {}
    for row_id, expression in rows.items():
        try:
            value = eval(expression, dict(namespace))  # noqa: S307 (the test's own table)
            results[row_id] = ["ok", repr(value)]
        except Exception as error:  # noqa: BLE001  (what it raised is the answer)
            results[row_id] = [type(error).__name__, str(error)]
    with open(sys.argv[2], "w") as out:
        json.dump(results, out)
    print("ARGUMENT ROWS EVALUATED", len(results), flush=True)


if __name__ == "__main__":
    worker_main(body)
