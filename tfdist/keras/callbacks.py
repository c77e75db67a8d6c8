"""Keras callbacks for data-parallel training; they use only public Keras 3 APIs.

- ``BroadcastGlobalVariablesCallback``: every rank starts from ``root_rank``'s
  model and optimizer state.
- ``MetricAverageCallback``: epoch logs are averaged over the ranks, so every
  rank's History (and early stopping, checkpoint decisions) agree.
- ``LearningRateWarmupCallback`` and ``LearningRateScheduleCallback``: set
  ``optimizer.learning_rate`` per epoch or per batch.

Every tfdist callback also turns XLA off for the train step (with a one-line
warning) when the model was compiled with ``jit_compile=True``: the
collectives have no XLA kernels.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict, Optional, Union

import keras
import numpy as np
import tensorflow as tf

from tfdist import ops, runtime
from tfdist.functions import broadcast_variables


def turn_off_xla(model: keras.Model) -> None:
    """Compiles ``model``'s train step without XLA, with a one-line warning, if XLA was on."""
    if getattr(model, "jit_compile", False) is True:
        warnings.warn("tfdist: jit_compile=True turned off for the train step (tfdist's "
                      "collectives have no XLA kernels)", stacklevel=3)
        model.jit_compile = False
        model.train_function = None  # rebuilt without XLA by the next fit()


class TfdistCallback(keras.callbacks.Callback):
    """Base of tfdist's callbacks: keeps the model's train step free of XLA."""

    def set_model(self, model: keras.Model) -> None:
        super().set_model(model)
        turn_off_xla(model)


def _build_optimizer(model: keras.Model) -> None:
    optimizer = model.optimizer
    if optimizer is not None and not optimizer.built:
        # Build it now, outside the train step, so that its variables (momenta,
        # iteration count) exist and can be broadcast before the first update.
        optimizer.build(model.trainable_variables)


class BroadcastGlobalVariablesCallback(TfdistCallback):
    """Copies ``root_rank``'s model and optimizer variables to every rank when training starts.

    If the model is not built when training starts (a Sequential without an
    Input is built in its first step), the copy happens before the second
    batch instead, as Horovod's after the first; from then on all ranks hold
    the same state either way.

    It has no batch-end hook on purpose: one would make Keras fetch the logs
    to Python after every step and stop it from dispatching steps ahead,
    which costs a small model a sizeable part of its throughput.
    """

    def __init__(self, root_rank: int = 0) -> None:
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False

    def _broadcast(self) -> None:
        model = self.model
        _build_optimizer(model)
        broadcast_variables(model.variables, self.root_rank)
        if model.optimizer is not None:
            broadcast_variables(model.optimizer.variables, self.root_rank)
        self.broadcast_done = True

    def on_train_begin(self, logs: Optional[Dict] = None) -> None:
        if not self.broadcast_done and self.model.built:
            self._broadcast()

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict] = None) -> None:
        if not self.broadcast_done and self.model.built:
            self._broadcast()


class MetricAverageCallback(TfdistCallback):
    """Replaces each numeric epoch log (loss, metrics, val_*) by its average over the ranks.

    Put it before callbacks that read the logs (checkpointing, early stopping);
    Keras' History comes last and records the averages.
    """

    def on_epoch_end(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if logs is None or runtime.size() == 1:
            return
        keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and
                      isinstance(np.asarray(v).item(), (int, float)))
        if not keys:
            return
        local = tf.constant([float(logs[k]) for k in keys], tf.float64)
        # One collective for all logs: a rank with other keys makes its shape
        # differ, which the runtime reports as an error instead of hanging.
        averaged = ops.allreduce(local, op=ops.Average, name="tfdist.metric_average").numpy()
        for key, value in zip(keys, averaged):
            logs[key] = float(value)


def _current_lr(optimizer: keras.optimizers.Optimizer) -> float:
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def _scale_velocity(optimizer: keras.optimizers.Optimizer, ratio: float) -> None:
    """Momentum correction (Goyal et al. 2017) for SGD with momentum.

    Keras' SGD keeps velocity = momentum * velocity - lr * g, already scaled
    by the old learning rate; multiplying it by new_lr / old_lr when the rate
    changes is the correction. (Keras bakes ``momentum`` into the compiled
    step, so scaling the hyperparameter for one batch would not take effect.)
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    velocities = getattr(inner, "momentums", None)
    if not getattr(inner, "momentum", 0.0) or not velocities or ratio == 1.0:
        return
    for velocity in velocities:
        velocity.assign(velocity * ratio)


class LearningRateScheduleCallback(TfdistCallback):
    """Sets ``optimizer.learning_rate = initial_lr * multiplier`` from start_epoch to end_epoch.

    ``multiplier`` is a number or a function of the epoch (a float epoch,
    e.g. 2.25, when ``staircase=False``: then the rate changes every batch).
    Outside [start_epoch, end_epoch) the rate is left alone.
    """

    def __init__(self, initial_lr: float, multiplier: Union[float, Callable[[float], float]],
                 start_epoch: int = 0, end_epoch: Optional[int] = None,
                 staircase: bool = True, momentum_correction: bool = True,
                 steps_per_epoch: Optional[int] = None, verbose: int = 0) -> None:
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.verbose = verbose
        self.current_epoch = 0

    def _in_range(self, epoch: int) -> bool:
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set_lr(self, lr: float) -> None:
        optimizer = self.model.optimizer
        old = _current_lr(optimizer)
        optimizer.learning_rate = lr
        if self.momentum_correction and old > 0 and optimizer.built:
            _scale_velocity(optimizer, lr / old)

    def _rate_at(self, epoch: float) -> float:
        return self.initial_lr * float(self.multiplier(epoch))

    def on_train_begin(self, logs: Optional[Dict] = None) -> None:
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")
        if not self.staircase and not self.steps_per_epoch:
            raise ValueError("staircase=False needs steps_per_epoch (fit() did not say it)")

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict] = None) -> None:
        self.current_epoch = epoch
        if self.staircase and self._in_range(epoch):
            self._set_lr(self._rate_at(epoch))

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict] = None) -> None:
        if not self.staircase and self._in_range(self.current_epoch):
            self._set_lr(self._rate_at(self.current_epoch + batch / self.steps_per_epoch))

    def on_epoch_end(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if logs is not None:
            logs["learning_rate"] = _current_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the rate from ``initial_lr / size`` to ``initial_lr`` over ``warmup_epochs``, per batch.

    "Gradual warmup" (Goyal et al. 2017): ``initial_lr`` is the rate meant for
    the full, size-times-larger batch; starting lower avoids early
    instability. The rate never decreases and is exactly ``initial_lr`` at the
    end of the warmup; the callback leaves it alone afterwards.
    """

    def __init__(self, initial_lr: float, warmup_epochs: int = 5,
                 momentum_correction: bool = True, steps_per_epoch: Optional[int] = None,
                 verbose: int = 0) -> None:
        size = runtime.size()

        def warmup(epoch: float) -> float:
            return (1.0 + epoch * (size - 1) / warmup_epochs) / size

        super().__init__(initial_lr, warmup, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch, verbose=verbose)
        self.warmup_epochs = warmup_epochs

    def on_epoch_end(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if epoch == self.warmup_epochs - 1:
            self._set_lr(self.initial_lr)
            if self.verbose and runtime.rank() == 0:
                print(f"\nEpoch {epoch + 1}: finished learning rate warmup to {self.initial_lr:g}.")
        super().on_epoch_end(epoch, logs)
