"""Keras callbacks for data-parallel training.

- ``BroadcastGlobalVariablesCallback``: every rank starts from ``root_rank``'s
  model and optimizer state.
- ``MetricAverageCallback``: epoch logs are averaged over the ranks, so every
  rank's History (and early stopping, checkpoint decisions) agree.
- ``LearningRateWarmupCallback`` and ``LearningRateScheduleCallback``: set
  ``optimizer.learning_rate`` per epoch or per batch.
- ``BackupAndRestore``: crash-safe checkpoints, resumed at the exact batch.

They use public Keras 3 APIs, except that BackupAndRestore sets
``model._initial_epoch`` to resume, as Keras' own BackupAndRestore does.
Every tfdist callback also turns XLA off for the train step (with a one-line
warning) when the model was compiled with ``jit_compile=True``: the
collectives have no XLA kernels.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Union

import keras
import numpy as np
import tensorflow as tf

from tfdist import _arguments, checkpoint, ops, preemption, runtime
from tfdist.config import LaunchInfo
from tfdist.functions import broadcast_variables
from tfdist.local_variables import is_local as is_local_variable
from tfdist.process_sets import ProcessSet, process_set_id, size_of


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


def _global_only(variables: List[Any]) -> List[Any]:
    return [v for v in variables if not is_local_variable(v)]


class BroadcastGlobalVariablesCallback(TfdistCallback):
    """Copies ``root_rank``'s model and optimizer variables to every rank when training starts.

    If the model is not built when training starts (a Sequential without an
    Input is built in its first step), the copy happens before the second
    batch instead, as Horovod's after the first; from then on all ranks hold
    the same state either way.

    Local variables (``register_local_var``, ``local_layers=``) are left out:
    they are the ones meant to differ between ranks, and "global" names the
    rest. ``broadcast_variables`` called directly with a local variable raises.

    It has no batch-end hook on purpose: one would make Keras fetch the logs
    to Python after every step and stop it from dispatching steps ahead,
    which costs a small model a sizeable part of its throughput.

    ``process_set``: copy among its ranks only (``root_rank``, a global
    rank, must be one of them), e.g. one model replica per set.
    """

    def __init__(self, root_rank: int = 0, process_set: Optional[ProcessSet] = None) -> None:
        super().__init__()
        self.root_rank = _arguments.integer(root_rank, "root_rank", minimum=0)
        process_set_id(process_set, "BroadcastGlobalVariablesCallback")
        self.process_set = process_set
        self.broadcast_done = False

    def _broadcast(self) -> None:
        model = self.model
        _build_optimizer(model)
        broadcast_variables(_global_only(model.variables), self.root_rank,
                            process_set=self.process_set)
        if model.optimizer is not None:
            broadcast_variables(_global_only(model.optimizer.variables), self.root_rank,
                                process_set=self.process_set)
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
    Keras' History comes last and records the averages. ``process_set``:
    average over its ranks only.
    """

    def __init__(self, process_set: Optional[ProcessSet] = None) -> None:
        super().__init__()
        process_set_id(process_set, "MetricAverageCallback")
        self.process_set = process_set

    def on_epoch_end(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if logs is None or size_of(self.process_set) == 1:
            return
        keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and
                      isinstance(np.asarray(v).item(), (int, float)))
        if not keys:
            return
        local = tf.constant([float(logs[k]) for k in keys], tf.float64)
        # One collective for all logs: a rank with other keys makes its shape
        # differ, which the runtime reports as an error instead of hanging.
        averaged = ops.allreduce(local, op=ops.Average, name="tfdist.metric_average",
                                 process_set=self.process_set).numpy()
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
        _arguments.number(initial_lr, "initial_lr", positive=True)
        if not callable(multiplier):
            _arguments.number(multiplier, "multiplier (a number or a function of the epoch)")
        _arguments.integer(start_epoch, "start_epoch", minimum=0)
        _arguments.optional_integer(end_epoch, "end_epoch", minimum=start_epoch + 1)
        _arguments.boolean(staircase, "staircase")
        _arguments.boolean(momentum_correction, "momentum_correction")
        _arguments.optional_integer(steps_per_epoch, "steps_per_epoch", minimum=1)
        _arguments.integer(verbose, "verbose", minimum=0)
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
        _arguments.integer(warmup_epochs, "warmup_epochs", minimum=1)
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


class BackupAndRestore(TfdistCallback):
    """Checkpoints training with ``tfdist.checkpoint`` and resumes it at the exact batch.

        backup = BackupAndRestore("ckpt", save_freq=100)
        data = backup.dataset(make_epoch, steps_per_epoch=S)  # make_epoch(epoch) -> tf.data
        model.fit(data, epochs=E, steps_per_epoch=S, callbacks=[backup])

    At the start of ``fit`` it restores the newest checkpoint in
    ``directory`` (model, optimizer, and the position in the data); it saves
    every ``save_freq`` batches, or at each epoch's end with
    ``save_freq="epoch"``, keeping the newest ``keep``; at the end of ``fit``
    it saves the final state and waits until it is durable. Saves hold training only while rank 0 copies
    the variables to host memory. A model that Keras builds in its first
    step (a Sequential without an Input) works too: from a fresh folder it
    is left to Keras; on resume it is built from the input shape the
    checkpoint records before the values are restored.

    Exact mid-epoch resume needs the input to come from ``dataset()``: it
    builds the stream of batches from ``make_epoch(epoch)`` (a function of
    the epoch number, e.g. shuffled with ``seed=epoch``) and starts it at the
    restored batch, so no batch is trained twice and none is skipped. With
    any other input, a mid-epoch checkpoint resumes at the start of its epoch
    (with a warning), as Keras' own BackupAndRestore always does.

    Under ``tfdistrun``, every ``preemption_check_every`` batches the ranks
    agree whether the launcher got SIGTERM; if so, all of them save the same
    batch and exit with ``tfdist.checkpoint.PREEMPTED_EXIT_CODE``.
    """

    def __init__(self, directory: str, save_freq: Union[str, int] = "epoch", keep: int = 3,
                 preemption_check_every: int = 10) -> None:
        super().__init__()
        _arguments.path(directory, "directory")
        _arguments.integer(keep, "keep", minimum=1)
        _arguments.integer(preemption_check_every, "preemption_check_every", minimum=1)
        if save_freq != "epoch" and (isinstance(save_freq, bool) or
                                     not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f'save_freq must be "epoch" or a positive number of batches, '
                             f"got {save_freq!r}")
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        if preemption_check_every < 1:
            raise ValueError("preemption_check_every must be at least 1")
        self.directory = str(directory)
        self.save_freq = save_freq
        self.keep = keep
        self.preemption_check_every = preemption_check_every
        # Where dataset()'s stream starts, in batches since the first epoch;
        # read by the input pipeline when fit creates its iterator, which is
        # after on_train_begin has restored it.
        self._data_start = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._steps_per_epoch: Optional[int] = None
        self._global_batch = 0      # batches trained since the very first epoch
        self._handled = -1          # the batch count last saved / checked
        self._saved = -1            # the batch count of the newest checkpoint
        self._last_batch: Optional[int] = None
        self._epoch = 0
        self._batch_in_epoch = 0
        self._check_preemption = False

    def dataset(self, make_epoch: Callable[[tf.Tensor], "tf.data.Dataset"],
                steps_per_epoch: int) -> "tf.data.Dataset":
        """The batches of every epoch, ``make_epoch(epoch)`` for epoch = 0, 1, ..., starting
        at the batch the restored checkpoint reached.

        ``make_epoch`` gets the epoch as an int64 scalar tensor and must return
        the same batches for the same epoch in every run (seed any shuffle
        with it) and at least ``steps_per_epoch`` of them; only the first
        ``steps_per_epoch`` are used. Pass the same ``steps_per_epoch`` to fit,
        and ``shuffle=False`` (the order is ``make_epoch``'s; with Keras'
        default, fit warns that it ignores ``shuffle=True``).
        """
        if not callable(make_epoch):
            raise TypeError("make_epoch must be a function of the epoch that returns a "
                            f"tf.data.Dataset, got {type(make_epoch).__name__}")
        _arguments.integer(steps_per_epoch, "steps_per_epoch", minimum=1)
        self._steps_per_epoch = int(steps_per_epoch)
        steps = tf.constant(self._steps_per_epoch, tf.int64)
        start = self._data_start

        def from_start(_: tf.Tensor) -> "tf.data.Dataset":
            epochs = tf.data.Dataset.range(start // steps, tf.int64.max)
            return epochs.flat_map(lambda epoch: make_epoch(epoch).take(steps)).skip(
                start % steps)

        return tf.data.Dataset.range(1).flat_map(from_start)

    def on_train_begin(self, logs: Optional[Dict] = None) -> None:
        steps = (self.params or {}).get("steps")
        epochs = (self.params or {}).get("epochs")
        if self._steps_per_epoch is not None and steps != self._steps_per_epoch:
            raise ValueError(f"BackupAndRestore.dataset() was given steps_per_epoch="
                             f"{self._steps_per_epoch}; pass the same steps_per_epoch to fit "
                             f"(it got {steps})")
        # tfdistrun exports TFDIST_PREEMPT_FILE to every rank, so every rank
        # takes the same branch and the agreement collective always matches.
        self._check_preemption = bool(LaunchInfo.from_environment().preempt_file)
        if self._check_preemption:
            preemption.watch()  # from now on, SIGTERM to tfdistrun means "save and stop"
        restored = checkpoint.restore(self.directory, model=self.model)
        extra = restored.extra if restored else {}
        self._global_batch = int(extra.get("global_batch", 0))
        self._handled = self._saved = self._global_batch
        self._epoch = int(extra.get("epoch", 0))
        self._batch_in_epoch = int(extra.get("batch", 0))
        if self._steps_per_epoch is not None:
            self._data_start.assign(self._global_batch)
            self._last_batch = epochs * self._steps_per_epoch if epochs else None
            self.model._initial_epoch = self._global_batch // self._steps_per_epoch
        elif restored is not None:
            if self._batch_in_epoch:
                warnings.warn(f"tfdist BackupAndRestore: {restored.path} was saved after batch "
                              f"{self._batch_in_epoch} of epoch {self._epoch}; without "
                              "BackupAndRestore.dataset() the data cannot resume there, so "
                              "the epoch starts again from its first batch", stacklevel=2)
            self.model._initial_epoch = self._epoch
        if restored is not None and runtime.rank() == 0:
            print(f"tfdist BackupAndRestore: resumed from {restored.path} "
                  f"(batch {self._global_batch})", flush=True)

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if self._steps_per_epoch is None:
            self._epoch, self._batch_in_epoch = epoch, 0

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict] = None) -> None:
        # The work for the batches finished so far happens here rather than in
        # on_train_batch_end: a batch-end hook would make Keras fetch the logs
        # after every step. At the next batch's start, the previous one's
        # update has been applied.
        self._batches_done(self._global_batch)
        self._global_batch += 1
        self._batch_in_epoch += 1
        if self._last_batch is not None and self._global_batch >= self._last_batch:
            # After a mid-epoch resume Keras' epochs are shifted by the
            # restored batch; stop when the data's last epoch is done.
            self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: Optional[Dict] = None) -> None:
        if self._steps_per_epoch is None:
            self._epoch, self._batch_in_epoch = epoch + 1, 0
        self._batches_done(self._global_batch, epoch_end=True)

    def on_train_end(self, logs: Optional[Dict] = None) -> None:
        self.model._initial_epoch = None
        if self._global_batch != self._saved:
            # The finished state too, so that a job restarted after fit()
            # returned does not train again.
            self._save(self._global_batch, "end")
        checkpoint.wait()

    def _batches_done(self, count: int, epoch_end: bool = False) -> None:
        if count == self._handled:
            return
        self._handled = count
        if (epoch_end and self.save_freq == "epoch") or (
                self.save_freq != "epoch" and count % self.save_freq == 0):
            self._save(count, "periodic")
        if (self._check_preemption and count % self.preemption_check_every == 0
                and checkpoint.preempted()):
            self._save(count, "preemption", blocking=True)
            if runtime.rank() == 0:
                print(f"tfdist BackupAndRestore: preempted; saved batch {count}, exiting with "
                      f"{checkpoint.PREEMPTED_EXIT_CODE}", flush=True)
            raise SystemExit(checkpoint.PREEMPTED_EXIT_CODE)

    def _save(self, count: int, reason: str, blocking: bool = False) -> None:
        if self._steps_per_epoch is not None:
            epoch, batch = divmod(count, self._steps_per_epoch)
        else:
            epoch, batch = self._epoch, self._batch_in_epoch
        extra = {"global_batch": count, "epoch": epoch, "batch": batch, "reason": reason,
                 "steps_per_epoch": self._steps_per_epoch}
        checkpoint.save(self.directory, count, model=self.model, extra=extra, keep=self.keep,
                        blocking=blocking)
        self._saved = count
