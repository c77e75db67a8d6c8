"""Everything ``import tfdist`` provides: tfdist/__init__.py copies these names.

Importing this module loads TensorFlow and tfdist's native library, and
fails, saying how to rebuild, when the library is missing or was built for
another TensorFlow.
"""
from tfdist import __all__  # noqa: F401  (tfdist/__init__ lists what this module provides)
from tfdist import _library
from tfdist import gradients as _gradients  # noqa: F401  (registers the gradients)
from tfdist.config import ConfigError, RuntimeSettings
from tfdist.functions import allgather_object, broadcast_object, broadcast_variables, join
from tfdist.ops import (Adasum, Average, Max, Min, Product, ReduceOp, Sum, allgather,
                        alltoall, barrier, broadcast, grouped_allgather,
                        grouped_reducescatter, local_rank_op, local_size_op, rank_op,
                        reducescatter, size_op)
from tfdist.collectives import allreduce, grouped_allreduce
from tfdist.process_sets import (ProcessSet, add_process_set, global_process_set, init,
                                 remove_process_set, shutdown)
from tfdist.compression import Compression  # noqa: F401
from tfdist.runtime import (InitError, NotInitializedError, algorithm_for, cross_rank,
                            cross_size, is_initialized, link_cost, local_rank,
                            local_size, rank, size, stats)
from tfdist.gradient_tape import (DistributedGradientTape,  # noqa: F401
                                  PartialDistributedGradientTape, default_num_groups)
from tfdist.local_variables import is_local as is_local_variable
from tfdist import checkpoint  # noqa: F401  (tfdist.checkpoint.save/restore after import tfdist)
from tfdist import elastic  # noqa: F401  (tfdist.elastic.run after import tfdist)

# Fail at import, with a message that says how to rebuild, when the native
# library is missing or was built for another TensorFlow.
_library.ops()
