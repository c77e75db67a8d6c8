"""Elastic Keras training, Horovod's API: ``hvd.elastic.KerasState`` and the ``model.fit`` callbacks.

    import tfdist.keras as hvd

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state)]      # last: it commits the others' updates

    @hvd.elastic.run
    def train(state):
        state.model.fit(dataset, steps_per_epoch=steps, epochs=epochs - state.epoch,
                        callbacks=callbacks)

After a membership change ``run`` restores the last commit, syncs it from
rank 0 and calls ``train`` again; the callbacks then make ``fit`` carry on
where the commit stood:

- ``UpdateEpochStateCallback``: ``state.epoch`` counts the epochs finished,
  across every ``fit`` (Keras numbers each fit's epochs from its
  ``initial_epoch``; pass either ``epochs=epochs - state.epoch`` as Horovod's
  examples do, or ``initial_epoch=state.epoch, epochs=epochs``).
- ``UpdateBatchStateCallback``: ``state.batch`` counts the batches finished
  in the current epoch (0 at the end of an epoch). Re-entering ``fit`` with
  ``state.batch == b`` skips the first ``b`` steps of the first epoch
  without running them or reading data, so that the epoch still ends after
  ``steps_per_epoch`` steps and Keras' batch numbers match ``state.batch``.
  (Horovod stores the last batch's index instead and shortens the epoch
  through ``params["steps"]``, which Keras 3 no longer reads.) Feed the data
  from where the commit stood (``tfdist.elastic.data``): the skipped steps
  read none.
- ``CommitStateCallback(state, batches_per_commit=1)``: ``state.commit()``
  every ``batches_per_commit`` batches and at the end of every epoch.

List the callbacks in that order, the commit last, as Horovod asks: Keras
calls them in order, and a commit must see the batch and epoch already
updated.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import keras

import tfdist.elastic as _elastic
from tfdist import runtime
from tfdist.checkpoint import messages, model_build
from tfdist.elastic.state import State, TensorFlowState

_OWN = ["CommitStateCallback", "KerasState", "UpdateBatchStateCallback",
        "UpdateEpochStateCallback"]
# run, RanksChangedError, State, ... as in horovod.tensorflow.keras.elastic.
__all__ = _OWN + [name for name in _elastic.__all__ if name not in _OWN]
globals().update({name: getattr(_elastic, name) for name in _elastic.__all__})


class KerasState(TensorFlowState):
    """A Keras model, its optimizer and attributes: ``KerasState(model, batch=0, epoch=0)``.

    ``optimizer`` defaults to ``model.optimizer``. The state's variables are
    all of ``model.variables`` and the optimizer's; an optimizer not yet
    built is built for the model's trainable variables once the model is
    built (as Keras' first step would). In ``sync()`` a rank whose model or
    optimizer is not built yet (one that has just joined) builds them from
    what rank 0 reports, the way a checkpoint restore does
    (tfdist/checkpoint/model_build.py), before the values arrive. Rank 0's
    model must be built by the first ``sync()``: otherwise every rank
    would start ``fit`` from its own random weights.
    """

    def __init__(self, model: Any, optimizer: Any = None, **attrs: Any) -> None:
        if model is None or not hasattr(model, "variables"):
            raise TypeError(f"model must be a Keras model, got {type(model).__name__}")
        if optimizer is not None and not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError("optimizer must be a Keras optimizer instance or None (then "
                            f"model.optimizer), got {optimizer!r} ({type(optimizer).__name__})")
        self.model = model
        self._optimizer = optimizer
        super().__init__(None, **attrs)

    @property
    def optimizer(self) -> Any:
        """The optimizer given, else the model's (``model.optimizer``, None before compile)."""
        return self._optimizer if self._optimizer is not None else getattr(
            self.model, "optimizer", None)

    def variables(self) -> List[Any]:
        model, optimizer = self.model, self.optimizer
        model_built = getattr(model, "built", True)
        if optimizer is not None and model_built and not getattr(optimizer, "built", True):
            # Not while the model is unbuilt: an optimizer built for no variables
            # refuses the model's later ones ("Unknown variable") in fit.
            optimizer.build(model.trainable_variables)
        optimizer_variables = (list(optimizer.variables)
                               if optimizer is not None and getattr(optimizer, "built", True)
                               else [])
        return list(model.variables) + optimizer_variables

    def _sync_variables(self) -> None:
        report: Optional[Dict[str, Any]] = None
        if runtime.rank() == 0:
            report = {"built": bool(getattr(self.model, "built", True)),
                      "model_build": model_build.config(self.model),
                      "optimizer": self.optimizer is not None}
        report = messages.broadcast_json(report, "tfdist.elastic.keras_state.build")
        if not report["built"]:
            raise ValueError("KerasState.sync(): the model is not built on rank 0, so every "
                             "rank would start from its own random weights; build it first "
                             "(a keras.Input, model.build(shape), or a call on a batch)")
        problem = ""
        if not getattr(self.model, "built", True):
            if report["model_build"] is None:
                problem = (f"the model is not built on rank {runtime.rank()}, and rank 0's "
                           "does not record its input shape; build it before sync()")
            else:
                problem = model_build.build(self.model, report["model_build"])
        if report["optimizer"] and self.optimizer is None:
            problem = problem or (f"rank 0 has an optimizer but rank {runtime.rank()}'s model "
                                  "is not compiled; compile it before sync()")
        if messages.on_any_rank(bool(problem), "tfdist.elastic.keras_state.build_failed"):
            raise ValueError("KerasState.sync(): "
                             + (problem or "building the model failed on another rank"))
        super()._sync_variables()  # variables() builds the optimizer where needed


class _FitProgress:
    """What the callbacks of one ``fit`` share, kept on the state: the batches to skip."""

    def __init__(self) -> None:
        self.skip = 0  # batches of the first epoch already done before this fit

    @staticmethod
    def of(state: Any) -> "_FitProgress":
        progress = getattr(state, "_tfdist_fit_progress", None)
        if progress is None:
            progress = _FitProgress()
            state._tfdist_fit_progress = progress
        return progress


def _unwrapped(function: Any) -> Any:
    return getattr(function, "_tfdist_skipping", function)


def _check_state(state: Any, callback: str, needs: Optional[str] = None) -> None:
    """Refuses anything but a tfdist.elastic.State (with attribute ``needs``), naming it."""
    if not isinstance(state, State):
        raise TypeError(f"{callback}: state must be a tfdist.elastic.State (for fit, "
                        f"hvd.elastic.KerasState(model, ...)), got {state!r} "
                        f"({type(state).__name__})")
    if needs is not None and not hasattr(state, needs):
        raise ValueError(f"{callback}: the state has no {needs!r} attribute; create it with "
                         f"one, e.g. KerasState(model, {needs}=0)")


class CommitStateCallback(keras.callbacks.Callback):
    """Commits ``state`` every ``batches_per_commit`` batches and at the end of each epoch."""

    def __init__(self, state: Any, batches_per_commit: int = 1) -> None:
        super().__init__()
        _check_state(state, "CommitStateCallback")
        if isinstance(batches_per_commit, bool) or not isinstance(batches_per_commit, int) \
                or batches_per_commit < 1:
            raise ValueError(f"batches_per_commit must be an integer >= 1, got "
                             f"{batches_per_commit!r}")
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        # The same count on every rank after a reset.
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if batch < _FitProgress.of(self.state).skip:
            return  # a step skipped on resuming: nothing was trained
        self.batches_remaining -= 1
        if self.batches_remaining <= 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps ``state.batch`` = the batches finished in the current epoch; resumes there."""

    def __init__(self, state: Any) -> None:
        super().__init__()
        _check_state(state, "UpdateBatchStateCallback")
        self.state = state

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        progress = _FitProgress.of(self.state)
        progress.skip = int(self.state.batch)
        model = self.model
        model.train_function = _unwrapped(model.train_function)  # a fit that raised
        if progress.skip <= 0:
            return
        execution = int(getattr(model, "steps_per_execution", 1) or 1)
        if progress.skip % execution:
            raise ValueError(f"state.batch={progress.skip} is not a multiple of the model's "
                             f"steps_per_execution={execution}: fit cannot resume there")
        original = model.train_function
        remaining = [progress.skip // execution]

        def skipping(iterator: Any) -> Dict[str, Any]:
            # Steps already trained before the reset: no training, no data read.
            remaining[0] -= 1
            if remaining[0] <= 0:
                model.train_function = original
            return {}

        skipping._tfdist_skipping = original  # type: ignore[attr-defined]
        model.train_function = skipping

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if batch >= _FitProgress.of(self.state).skip:
            self.state.batch = batch + 1

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        _FitProgress.of(self.state).skip = 0
        self.state.batch = 0

    def on_train_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        _FitProgress.of(self.state).skip = 0
        self.model.train_function = _unwrapped(self.model.train_function)


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps ``state.epoch`` = the epochs finished, across resets and ``fit`` calls."""

    def __init__(self, state: Any) -> None:
        super().__init__()
        _check_state(state, "UpdateEpochStateCallback", needs="epoch")
        self.state = state
        self.initial_epoch = int(state.epoch)
        self._first_keras_epoch: Optional[int] = None

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        self.initial_epoch = int(self.state.epoch)
        self._first_keras_epoch = None

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        if self._first_keras_epoch is None:
            self._first_keras_epoch = epoch

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        first = self._first_keras_epoch if self._first_keras_epoch is not None else epoch
        self.state.epoch = self.initial_epoch + (epoch - first) + 1
