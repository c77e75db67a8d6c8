"""``SyncBatchNormalization``: batch normalization over the global batch of all ranks.

In training, each rank sums its inputs, their squares and its count per
channel; one Sum allreduce of the three (concatenated) gives the global
sums, from which every rank takes the same mean and variance:

    mean = Σx / n,   variance = max(Σx² / n - mean², 0),   n = Σ counts

Ranks may hold different batch sizes: the counts are summed too. The
allreduce has a gradient (tfdist/gradients.py: the Sum of the incoming
gradients), so the gradient that reaches each rank's inputs includes the
other ranks' losses through the shared statistics, exactly as if one
process had normalized the concatenated batch.

Inference (``training=False``), a frozen layer (``trainable=False``) and a
single rank are the Keras layer itself: there, ``call`` hands over to
``keras.layers.BatchNormalization.call``.
"""
from __future__ import annotations

import numbers
from typing import Any, Optional

import keras
import tensorflow as tf

from tfdist import ops, runtime


@keras.saving.register_keras_serializable(package="tfdist")
class SyncBatchNormalization(keras.layers.BatchNormalization):
    """``keras.layers.BatchNormalization`` whose batch statistics span every rank's batch.

    Takes the Keras layer's arguments (``axis``, ``momentum``, ``epsilon``,
    ``center``, ``scale``, initializers, regularizers, constraints), except
    ``synchronized=True`` (tf.distribute's synchronisation) and
    ``renorm=True``, which it refuses. Every rank must call the layer in
    training at the same points of its step (it issues one collective per
    call, and one more in the backward pass); each rank's batch may have
    another size, and may even be empty.

    Saved models name it ``tfdist>SyncBatchNormalization``; ``import
    tfdist.keras`` registers it, so ``keras.models.load_model`` restores it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("synchronized"):
            raise ValueError("SyncBatchNormalization synchronizes over tfdist's ranks; "
                             "synchronized=True (tf.distribute's) is not accepted")
        # Keras' own message for these names neither the argument nor the range.
        momentum = kwargs.get("momentum", args[1] if len(args) > 1 else 0.99)
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real):
            raise TypeError(f"momentum must be a number in [0, 1], got {momentum!r}")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"momentum must be a number in [0, 1], got {momentum!r}")
        if kwargs.get("renorm"):
            raise ValueError("SyncBatchNormalization does not support renorm=True; "
                             "use renorm=False")
        super().__init__(*args, **kwargs)

    # The collectives the layer uses, in one place.

    def _group_size(self) -> int:
        """How many ranks share the batch statistics."""
        return runtime.size()

    def _sum_over_ranks(self, tensor: tf.Tensor) -> tf.Tensor:
        """The elementwise sum of ``tensor`` over the ranks (differentiable)."""
        return ops.allreduce(tensor, op=ops.Sum)

    def call(self, inputs, training=None, mask=None):
        if not (training and self.trainable) or self._group_size() == 1:
            return super().call(inputs, training=training, mask=mask)
        compute_dtype = keras.backend.result_type(inputs.dtype, "float32")
        x = tf.cast(inputs, compute_dtype)
        mean, variance = self._global_moments(x, mask)
        # The same update, with the same constants, as the Keras layer's.
        self.moving_mean.assign(tf.cast(self.moving_mean, compute_dtype) * self.momentum
                                + mean * (1.0 - self.momentum))
        self.moving_variance.assign(tf.cast(self.moving_variance, compute_dtype) * self.momentum
                                    + variance * (1.0 - self.momentum))
        gamma = tf.cast(self.gamma, compute_dtype) if self.scale else None
        beta = tf.cast(self.beta, compute_dtype) if self.center else None
        outputs = keras.ops.batch_normalization(x, mean, variance, axis=self.axis,
                                                offset=beta, scale=gamma, epsilon=self.epsilon)
        return tf.cast(outputs, self.compute_dtype)

    def _global_moments(self, x: tf.Tensor, mask: Optional[tf.Tensor]):
        """Mean and variance per channel over every rank's ``x`` (masked entries left out)."""
        ndim = len(x.shape)
        axis = self.axis % ndim
        axes = [i for i in range(ndim) if i != axis]
        channels = int(x.shape[axis])
        if mask is None:
            local_sum = tf.reduce_sum(x, axis=axes)
            local_squares = tf.reduce_sum(tf.square(x), axis=axes)
            count = tf.cast(tf.size(x) // channels, x.dtype)
            local_count = tf.fill([channels], count)
        else:
            # As in the Keras layer: the mask covers every axis but the last.
            weights = tf.cast(tf.broadcast_to(tf.expand_dims(mask, -1), tf.shape(x)), x.dtype)
            local_sum = tf.reduce_sum(x * weights, axis=axes)
            local_squares = tf.reduce_sum(tf.square(x) * weights, axis=axes)
            local_count = tf.reduce_sum(weights, axis=axes)
        total = self._sum_over_ranks(tf.concat([local_sum, local_squares, local_count], 0))
        total_sum, total_squares, total_count = tf.split(total, 3)
        mean = tf.math.divide_no_nan(total_sum, total_count)
        mean_of_squares = tf.math.divide_no_nan(total_squares, total_count)
        variance = tf.maximum(mean_of_squares - tf.square(mean), 0.0)
        return mean, variance
