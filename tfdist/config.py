"""tfdist's settings: read once from TFDIST_* environment variables, overridden by init() arguments.

This is the only module that reads TFDIST_* variables. The runtime receives
the result as one string (see ``RuntimeSettings.to_runtime_string``).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping, Optional

from tfdist import _library


def __getattr__(name: str) -> Any:
    # ALGORITHMS, the allreduce algorithm names indexed by value, comes from
    # the native library, loaded only when asked for.
    if name == "ALGORITHMS":
        return _library.allreduce_algorithms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ConfigError(ValueError):
    """A TFDIST_* variable or init() argument has a value tfdist cannot use."""


@dataclasses.dataclass(frozen=True)
class RuntimeSettings:
    """Everything configurable about the runtime, with the defaults tfdist ships.

    Attributes map to environment variables by upper-casing with a TFDIST_
    prefix, e.g. ``fusion_threshold`` is ``TFDIST_FUSION_THRESHOLD``.
    """

    #: Allreduce algorithm when a call names none: auto (cost model) or a fixed one.
    allreduce_algorithm: str = "auto"
    #: Bytes of small tensors packed into one fused allreduce; 0 disables fusion.
    fusion_threshold: int = 64 * 1024 * 1024
    #: Longest pause, in milliseconds, between negotiation rounds while work waits.
    cycle_time: float = 1.0
    #: Tensors remembered by the response cache; 0 disables it.
    cache_capacity: int = 1024
    #: Seconds a collective may wait for other ranks before a stall is reported.
    stall_check_time: float = 60.0
    #: Seconds after which a stalled job aborts on every rank; 0 waits forever.
    #: Ten minutes: longer than any legitimate wait of one rank for another
    #: (an evaluation on rank 0, a checkpoint), short enough that a job that
    #: can never finish ends with a message instead of hanging.
    stall_shutdown_time: float = 600.0
    #: Link latency (s) and inverse bandwidth (s/byte) for the cost model;
    #: unset (negative) means measured at init and cached per host.
    latency: float = -1.0
    seconds_per_byte: float = -1.0
    #: Seconds to reduce one byte, used with the two above (0: the survey's formulas).
    reduce_seconds_per_byte: float = 0.0
    #: Inter-host link latency (s) and inverse bandwidth (s/byte) for the cost
    #: model; unset (negative) means measured at init between ranks on different hosts.
    inter_host_latency: float = -1.0
    inter_host_seconds_per_byte: float = -1.0
    #: Split the ranks into this many hosts of consecutive ranks; unset: the real hosts.
    virtual_hosts: Optional[int] = None
    #: Emulated bandwidth (bytes/s) of every link between hosts; unset: no emulation.
    emulated_bandwidth: Optional[float] = None
    #: Emulated latency (s) of every link between hosts, with emulated_bandwidth.
    emulated_latency: Optional[float] = None
    #: Where the measured link cost is cached (read and written by rank 0 only, which
    #: creates it; if it cannot, it warns and measures at every init); empty disables it.
    calibration_cache_dir: str = str(Path.home() / ".cache" / "tfdist")
    #: Chrome-trace timeline path (".<rank>" is appended when size > 1).
    timeline: str = ""
    #: One stderr line per collective (name, size, algorithm) when true.
    debug: bool = False

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None,
                         **overrides: Any) -> "RuntimeSettings":
        """Reads TFDIST_* variables, then applies keyword overrides (init() arguments)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            key = "TFDIST_" + field.name.upper()
            if key in environ and environ[key] != "":
                values[field.name] = _convert(key, environ[key], field.type)
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown tfdist setting(s): {', '.join(sorted(unknown))}; "
                              "expected keyword arguments among "
                              f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        values.update({k: _checked_override(k, v, cls.__dataclass_fields__[k].type)
                       for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raises ConfigError naming the first setting that cannot work."""
        algorithms = _library.allreduce_algorithms()
        if self.allreduce_algorithm not in algorithms:
            raise ConfigError(f"TFDIST_ALLREDUCE_ALGORITHM={self.allreduce_algorithm!r}: "
                              f"expected one of {', '.join(algorithms)}")
        for name in ("fusion_threshold", "cache_capacity"):
            if getattr(self, name) < 0:
                raise ConfigError(f"TFDIST_{name.upper()} must not be negative")
        if self.cycle_time <= 0:
            raise ConfigError("TFDIST_CYCLE_TIME must be positive (milliseconds)")
        if self.stall_check_time <= 0:
            raise ConfigError("TFDIST_STALL_CHECK_TIME must be positive (seconds)")
        if self.stall_shutdown_time < 0:
            raise ConfigError("TFDIST_STALL_SHUTDOWN_TIME must not be negative (seconds; "
                              "0 waits forever)")
        if self.virtual_hosts is not None and self.virtual_hosts <= 0:
            raise ConfigError(f"TFDIST_VIRTUAL_HOSTS={self.virtual_hosts} must be a positive "
                              "number of hosts that divides the number of ranks")
        if self.emulated_bandwidth is not None and not self.emulated_bandwidth > 0:
            raise ConfigError(f"TFDIST_EMULATED_BANDWIDTH={self.emulated_bandwidth} must be a "
                              "positive number of bytes per second")
        if self.emulated_latency is not None:
            if not self.emulated_latency >= 0:
                raise ConfigError(f"TFDIST_EMULATED_LATENCY={self.emulated_latency} must be a "
                                  "non-negative number of seconds")
            if self.emulated_bandwidth is None:
                raise ConfigError("TFDIST_EMULATED_LATENCY is set but TFDIST_EMULATED_BANDWIDTH "
                                  "is not: emulated links need a bandwidth")

    def to_runtime_string(self) -> str:
        """The "key=value;..." form the C++ runtime parses (cc/core/runtime/config.cc)."""
        # Only rank 0 uses the cache directory, and creates it when it writes
        # (cc/core/tuning/calibration.cc): a rank whose HOME cannot hold it
        # must not make init fail, nor make the ranks' settings differ.
        pairs = {
            "algorithm": self.allreduce_algorithm,
            "fusion_threshold": self.fusion_threshold,
            "cycle_time_ms": self.cycle_time,
            "cache_capacity": self.cache_capacity,
            "stall_check_seconds": self.stall_check_time,
            "stall_shutdown_seconds": self.stall_shutdown_time,
            "latency_seconds": self.latency,
            "seconds_per_byte": self.seconds_per_byte,
            "reduce_seconds_per_byte": self.reduce_seconds_per_byte,
            "inter_host_latency_seconds": self.inter_host_latency,
            "inter_host_seconds_per_byte": self.inter_host_seconds_per_byte,
            "calibration_cache_dir": self.calibration_cache_dir,
            "timeline": self.timeline,
            "debug_log": int(self.debug),
        }
        optional = {"virtual_hosts": self.virtual_hosts,
                    "emulated_bandwidth": self.emulated_bandwidth,
                    "emulated_latency": self.emulated_latency}
        pairs.update({k: v for k, v in optional.items() if v is not None})
        for key, value in pairs.items():
            if ";" in str(value):
                raise ConfigError(f"tfdist setting {key} may not contain ';'")
        return ";".join(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in pairs.items())


def _checked_override(name: str, value: Any, kind: Any) -> Any:
    """An init() keyword argument, if its type fits the setting; else ConfigError naming it."""
    kind = kind if isinstance(kind, str) else kind.__name__
    if kind.startswith("Optional[") and kind.endswith("]"):
        kind = kind[len("Optional["):-1]
    accepted = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}.get(kind)
    integral = kind == "int" and isinstance(value, float) and value.is_integer()
    if accepted is None or integral:
        return int(value) if integral else value
    # numpy scalars count as the Python numbers they stand for.
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if not isinstance(value, accepted) or (kind != "bool" and isinstance(value, bool)):
        wanted = {"int": "an integer", "float": "a number", "bool": "True or False",
                  "str": "a string"}[kind]
        raise ConfigError(f"init({name}={value!r}): expected {wanted} "
                          f"(the setting TFDIST_{name.upper()})")
    return value


def _convert(key: str, text: str, kind: Any) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    if kind.startswith("Optional[") and kind.endswith("]"):
        kind = kind[len("Optional["):-1]
    try:
        if kind == "int":
            return int(float(text))
        if kind == "float":
            return float(text)
        if kind == "bool":
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
    except ValueError:
        raise ConfigError(f"{key}={text!r} is not a valid {kind}") from None
    return text


@dataclasses.dataclass(frozen=True)
class LaunchInfo:
    """What ``tfdistrun`` tells every rank about the job (not runtime settings).

    ``restart``: TFDIST_RESTART, 0 on the first run of the job, n on its n-th
    restart. ``preempt_file``: TFDIST_PREEMPT_FILE, the file the launcher
    creates when it is asked to stop (SIGTERM); empty when not launched by
    tfdistrun.
    """

    restart: int = 0
    preempt_file: str = ""

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None) -> "LaunchInfo":
        environ = os.environ if environ is None else environ
        restart = environ.get("TFDIST_RESTART", "") or "0"
        try:
            count = int(restart)
        except ValueError:
            raise ConfigError(f"TFDIST_RESTART={restart!r}: expected a whole number") from None
        return cls(restart=count, preempt_file=environ.get("TFDIST_PREEMPT_FILE", ""))
