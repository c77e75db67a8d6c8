"""Data-parallel Keras 3 training with Horovod's API: ``import tfdist.keras as hvd``.

    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3 * hvd.size())),
                  loss=..., metrics=...)
    model.fit(x_shard, y_shard, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                                           hvd.callbacks.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)

Everything in ``tfdist`` is available here too, and ``hvd.elastic`` is
tfdist.keras.elastic (KerasState, the elastic callbacks, run), as in Horovod.
"""
from tfdist import *  # noqa: F401,F403  (the whole tfdist API, as in horovod.keras)
from tfdist import __all__ as _tfdist_all
from tfdist.compression import Compression
from tfdist.gradient_tape import DistributedGradientTape
from tfdist.keras import callbacks, elastic
from tfdist.functions import broadcast_variables
from tfdist.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer
from tfdist.keras.saving import load_model
from tfdist.keras.sync_batch_norm import SyncBatchNormalization

__all__ = list(_tfdist_all) + [
    "Compression", "DistributedGradientTape", "DistributedOptimizer",
    "PartialDistributedOptimizer", "SyncBatchNormalization", "broadcast_variables",
    "callbacks", "elastic", "load_model",
]
