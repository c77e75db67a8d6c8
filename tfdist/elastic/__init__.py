"""Elastic training: ``tfdist.elastic.State``, ``ObjectState``, ``TensorFlowState``.

Minimal version from dev/estate (the state part only); helper "elastic"
adds ``run`` and ``RanksChangedError`` here, and the lead merges the two.
"""
from tfdist.elastic.state import ObjectState, State, TensorFlowState

__all__ = ["ObjectState", "State", "TensorFlowState"]
