"""Gradient compression: ``Compression.none``, ``.fp16``, ``.bf16``, ``.topk``, ``.powersgd``,
``.auto``.

- ``base``: ``Compressor``, the interface (and the identity, ``Compression.none``);
- ``casts``: fp16 and bf16, floating tensors rounded to 16 bits by the runtime;
- ``topk``: top-k sparsification with error feedback;
- ``powersgd``: PowerSGD low-rank compression with error feedback;
- ``auto``: per tensor group, none, bf16 or PowerSGD, by the measured link and
  compression costs;
- ``stateful``: what top-k and PowerSGD share (per-tensor state keyed by name,
  the ranks' settings agreement, the count of bytes sent).

``REGISTRY`` maps each compressor's name to what makes it from a
``get_config()`` dict; ``Compression.from_config``, ``as_compressor`` (the
``compression=`` argument, which accepts the names) and the docs' list of
names all read it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence, Union

from tfdist import _arguments
from tfdist.compression.auto import AutoCompressor
from tfdist.compression.base import Compressor, check_compression
from tfdist.compression.casts import BF16Compressor, FP16Compressor
from tfdist.compression.powersgd import PowerSGDCompressor
from tfdist.compression.topk import TopKCompressor

__all__ = ["AutoCompressor", "BF16Compressor", "Compression", "Compressor", "FP16Compressor",
           "PowerSGDCompressor", "REGISTRY", "TopKCompressor", "check_compression",
           "as_compressor"]

_NONE = Compressor()
_FP16 = FP16Compressor()
_BF16 = BF16Compressor()
_AUTO = AutoCompressor()

#: Compressor name -> a function of its ``get_config()`` dict that makes it.
#: The stateless ones are shared instances; top-k and PowerSGD keep state,
#: so each config makes a new compressor.
REGISTRY: Dict[str, Callable[[Dict[str, Any]], Compressor]] = {
    "none": lambda config: _NONE,
    "fp16": lambda config: _FP16,
    "bf16": lambda config: _BF16,
    "topk": TopKCompressor.from_config,
    "powersgd": PowerSGDCompressor.from_config,
    "auto": AutoCompressor.from_config,
}

#: The compressions that can be given by name, as ``compression=`` accepts them.
COMPRESSION_NAMES = tuple(REGISTRY)
_COMPRESSION_HELP = ("a tfdist.Compression compressor (Compression.none, .fp16, .bf16, "
                     ".topk(ratio), .powersgd(rank), .auto()) or one of the names "
                     + ", ".join(repr(n) for n in COMPRESSION_NAMES))
_STATELESS = ("none", "fp16", "bf16")


class Compression:
    """The available compressors: ``Compression.none``, ``.fp16``, ``.bf16``, ``.topk``,
    ``.powersgd``, ``.auto``."""

    none = _NONE
    fp16 = _FP16
    bf16 = _BF16

    @staticmethod
    def topk(ratio: float, error_feedback: bool = True, momentum: float = 0.0,
             start_step: int = 0) -> Compressor:
        """Sends the ceil(ratio·n) largest-magnitude entries of each gradient (plus its
        residual, with ``error_feedback``); ``momentum`` > 0 adds DGC's momentum
        correction (use an optimizer without momentum then); dense before ``start_step``
        calls; see tfdist/compression/topk.py."""
        return TopKCompressor(ratio, error_feedback=error_feedback, momentum=momentum,
                              start_step=start_step)

    @staticmethod
    def powersgd(rank: int = 1, error_feedback: bool = True, start_step: int = 0) -> Compressor:
        """PowerSGD of rank ``rank`` on matrices (dense before ``start_step`` calls);
        see tfdist/compression/powersgd.py."""
        return PowerSGDCompressor(rank, error_feedback=error_feedback, start_step=start_step)

    @staticmethod
    def auto(powersgd_rank: int = 2, half: str = "bf16",
             candidates: Sequence[str] = ("none", "half", "powersgd"),
             powersgd_gain: float = 0.8) -> Compressor:
        """Per tensor group (one call), sends the tensors as none, ``half`` ("bf16" or
        "fp16") or PowerSGD of ``powersgd_rank``, whichever the cost model's link curves
        and this job's measured compression costs predict to be fastest; PowerSGD only
        when predicted at most ``powersgd_gain`` of the best dense choice's time. Every
        rank makes the same choice. See tfdist/compression/auto.py and
        docs/compression.md, "Compression.auto"."""
        return AutoCompressor(powersgd_rank, half=half, candidates=candidates,
                              powersgd_gain=powersgd_gain)

    @staticmethod
    def by_name(name: str) -> Compressor:
        """The compressor called ``name`` ("none", "fp16" or "bf16"); used when restoring a
        config."""
        if name in _STATELESS:
            return REGISTRY[name]({"name": name})
        raise ValueError(f"unknown compression {name!r}; expected 'none', 'fp16' or 'bf16'")

    @staticmethod
    def from_config(config: Union[str, Dict[str, Any]]) -> Compressor:
        """The compressor a ``get_config()`` dict (or, from older saves, a name) describes."""
        if isinstance(config, str):
            return Compression.by_name(config)
        if config["name"] in _STATELESS:
            return Compression.by_name(config["name"])
        if config["name"] not in REGISTRY:
            raise ValueError(f"unknown compression {config['name']!r}")
        return REGISTRY[config["name"]](config)


def as_compressor(value: Any, argument: str = "compression") -> Compressor:
    """``value`` as a tfdist.Compression compressor; None is Compression.none, and the
    names in COMPRESSION_NAMES are accepted too ("topk" only with a ratio)."""
    if isinstance(value, Compressor):
        return value
    if value is None:
        return Compression.none
    if isinstance(value, str):
        key = value.lower()
        if key in _STATELESS:
            return Compression.by_name(key)
        if key == "powersgd":
            return Compression.powersgd()
        if key == "auto":
            # One shared instance, so that a call site passing the name each step keeps its
            # decisions instead of agreeing afresh every call.
            return _AUTO
        if key == "topk":
            raise ValueError(f"{argument}='topk' needs the share of entries to send: "
                             "use tfdist.Compression.topk(ratio), e.g. topk(0.01)")
        raise ValueError(f"{argument}={value!r}: unknown compression; expected "
                         f"{_COMPRESSION_HELP}")
    raise TypeError(f"{argument}={_arguments._shown(value)}: expected {_COMPRESSION_HELP}")
