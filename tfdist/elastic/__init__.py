"""Elastic training: the job carries on in the same processes when ranks fail or join.

``run`` (the decorator that recovers), ``RanksChangedError`` (what a
collective raises when the membership changed), and the state that goes back
to its last commit and is synced to the new membership: ``State``,
``ObjectState``, ``TensorFlowState`` (``tfdist.keras.elastic.KerasState`` for
Keras), and ``tfdist.elastic.data``, each rank's samples of an epoch across
membership changes. docs/elastic.md says how it works and how to use it.
"""
from tfdist.elastic import data
from tfdist.elastic.errors import ElasticJobError, RanksChangedError
from tfdist.elastic.run import run
from tfdist.elastic.state import ObjectState, State, TensorFlowState

__all__ = ["ElasticJobError", "ObjectState", "RanksChangedError", "State", "TensorFlowState",
           "data", "run"]
