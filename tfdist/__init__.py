"""tfdist: data-parallel training for TensorFlow and Keras over MPI, with Horovod's API.

    import tfdist
    tfdist.init()
    total = tfdist.allreduce(tf.ones(3) * tfdist.rank(), op=tfdist.Sum)
"""
from tfdist import _library
from tfdist import gradients as _gradients  # noqa: F401  (registers the gradients)
from tfdist.config import ConfigError, RuntimeSettings
from tfdist.functions import allgather_object, broadcast_object, broadcast_variables, join
from tfdist.ops import (Adasum, Average, Max, Min, Product, ReduceOp, Sum, allgather,
                        alltoall, barrier, broadcast, grouped_allgather,
                        grouped_reducescatter, local_rank_op, local_size_op, rank_op,
                        reducescatter, size_op)
from tfdist.collectives import allreduce, grouped_allreduce
from tfdist.compression import Compression
from tfdist.runtime import (InitError, NotInitializedError, algorithm_for, cross_rank,
                            cross_size, init, is_initialized, link_cost, local_rank,
                            local_size, rank, shutdown, size, stats)
from tfdist.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                  PartialDistributedGradientTape, default_num_groups)
from tfdist.local_variables import is_local as is_local_variable
from tfdist import checkpoint  # noqa: E402  (tfdist.checkpoint.save/restore after import tfdist)

__version__ = "0.1.0"

__all__ = [
    "Adasum", "Average", "ConfigError", "InitError", "Max", "Min", "NotInitializedError",
    "PartialDistributedGradientTape", "Product", "ReduceOp", "RuntimeSettings", "Sum",
    "algorithm_for", "allgather", "allgather_object", "allreduce", "alltoall", "barrier",
    "broadcast", "broadcast_object", "broadcast_variables", "cross_rank", "cross_size",
    "default_num_groups", "grouped_allgather", "grouped_allreduce", "grouped_reducescatter",
    "init", "is_initialized", "is_local_variable", "join", "link_cost", "local_rank",
    "local_rank_op", "local_size",
    "local_size_op", "rank", "rank_op", "reducescatter", "shutdown", "size", "size_op",
    "stats",
]

# Fail at import, with a message that says how to rebuild, when the native
# library is missing or was built for another TensorFlow.
_library.ops()
