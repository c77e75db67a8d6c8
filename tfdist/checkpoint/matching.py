"""Which saved array goes into which variable: by path where the paths say, else by position.

A checkpoint stores each group's arrays in the order of the saving job's
variables, with each variable's path (Keras 3 ``variable.path``, or a
``tf.Variable``'s name). The order alone is not enough: a layer that
creates ``beta`` before ``alpha`` in one version of a script and after it
in another lists two same-shaped variables the other way round, and a
restore by position would swap them without any error.

The rules, per group:

1. Every path unique on both sides and the same set of paths: each array
   goes to the variable of its path.
2. Otherwise (a second model built in the same process is
   ``sequential_1/dense_2/kernel`` where the saved one was
   ``sequential/dense/kernel``; Keras numbers names process-wide), paths
   are compared with those numbers removed (``_<digits>`` before a ``/``,
   ``_``, ``:`` or the end). A name that is unique on both sides pairs its
   array and its variable. Then the same with the last component alone
   (``two_weights_alpha_momentum``), among those still unpaired: the scopes
   above it depend on how a variable was created (Keras names a
   LossScaleOptimizer's slots ``loss_scale_optimizer/adam/...`` when it
   builds them in a step, ``adam/...`` when ``build`` is called directly).
3. What is left (unnamed or non-unique names: ``tf.Variable``\\ s created
   without a name, several ``dense/kernel`` once the numbers are gone,
   files without paths) is paired by position among the leftovers. If both
   sides of such a pair are named and their last components (``kernel``,
   ``alpha``) differ, the checkpoint and the variables disagree, and the
   restore is refused naming both.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import List, Optional, Sequence, Tuple

# Keras' process-wide numbering of names ("dense_3"), and TensorFlow's ("Variable_1:0").
_NUMBERING = re.compile(r"_\d+(?=[/_:]|$)")
# The names TensorFlow gives variables created without one: as good as none.
_UNNAMED_LEAVES = ("Variable", "Variable:0", "")


def _normalized(path: str) -> str:
    return _NUMBERING.sub("", path)


def _leaf(path: str) -> str:
    return _normalized(path).rsplit("/", 1)[-1]


def _named(path: str) -> bool:
    return bool(path) and _leaf(path) not in _UNNAMED_LEAVES


def _unique(paths: Sequence[str]) -> bool:
    return all(_named(p) for p in paths) and len(set(paths)) == len(paths)


def _pair_unique(order: List[Optional[int]], saved: Sequence[str], current: Sequence[str]) -> None:
    """Pairs, in ``order``, the unpaired saved and current entries whose name ("": none) is
    unique among the unpaired ones on both sides."""
    taken = set(i for i in order if i is not None)
    saved_counts = Counter(n for j, n in enumerate(saved) if order[j] is None)
    current_counts = Counter(n for i, n in enumerate(current) if i not in taken)
    where = {n: i for i, n in enumerate(current) if i not in taken}
    for index, name in enumerate(saved):
        if (order[index] is None and name and saved_counts[name] == 1
                and current_counts[name] == 1):
            order[index] = where[name]


def match(saved: Sequence[Optional[str]], current: Sequence[str]) -> Tuple[List[int], str]:
    """For each saved array j, the index of the variable that takes it; or ([], why not).

    ``saved`` and ``current`` are the paths of one group, of equal length;
    a saved path may be None or "" (unnamed). The message names both paths
    of the first pair whose names disagree.
    """
    saved = [p or "" for p in saved]
    if _unique(saved) and _unique(current) and set(saved) == set(current):
        where = {path: index for index, path in enumerate(current)}
        return [where[path] for path in saved], ""
    saved_names = [_normalized(p) if _named(p) else "" for p in saved]
    current_names = [_normalized(p) if _named(p) else "" for p in current]
    order: List[Optional[int]] = [None] * len(saved)
    _pair_unique(order, saved_names, current_names)
    _pair_unique(order, [n and _leaf(n) for n in saved_names],
                 [n and _leaf(n) for n in current_names])
    taken = set(i for i in order if i is not None)
    left = [i for i in range(len(current)) if i not in taken]
    for saved_index, current_index in zip([j for j, i in enumerate(order) if i is None], left):
        if (saved_names[saved_index] and current_names[current_index]
                and _leaf(saved[saved_index]) != _leaf(current[current_index])):
            return [], (f"the array saved as '{saved[saved_index]}' (position {saved_index}) "
                        f"would go, by position, into '{current[current_index]}' (position "
                        f"{current_index}), and the names disagree")
        order[saved_index] = current_index
    return [int(i) for i in order], ""
