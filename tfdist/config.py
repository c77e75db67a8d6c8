"""tfdist's settings: read once from TFDIST_* environment variables, overridden by init() arguments.

This is the only module that reads TFDIST_* variables. The runtime receives
the result as one string (see ``RuntimeSettings.to_runtime_string``).
"""
from __future__ import annotations

import dataclasses
import difflib
import os
from typing import Any, List, Mapping, Optional

from tfdist import _library
from tfdist.settings_table import BY_NAME as _TABLE
from tfdist.settings_table import SETTINGS as _SETTINGS
from tfdist.settings_table import settings as _settings_of


def _default(name: str) -> Any:
    """The table's default for a setting (tfdist/settings_table.py)."""
    value = _TABLE[name].default
    return os.path.expanduser(value) if name == "calibration_cache_dir" else value


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
    prefix, e.g. ``fusion_threshold`` is ``TFDIST_FUSION_THRESHOLD``. Defaults,
    types and meanings come from tfdist/settings_table.py (docs/reference/settings.md).
    """

    allreduce_algorithm: str = _default("allreduce_algorithm")
    auto_trials: int = _default("auto_trials")
    fusion_threshold: int = _default("fusion_threshold")
    cycle_time: float = _default("cycle_time")
    cache_capacity: int = _default("cache_capacity")
    stall_check_time: float = _default("stall_check_time")
    stall_shutdown_time: float = _default("stall_shutdown_time")
    stall_eviction: Optional[bool] = _default("stall_eviction")
    latency: float = _default("latency")
    seconds_per_byte: float = _default("seconds_per_byte")
    reduce_seconds_per_byte: float = _default("reduce_seconds_per_byte")
    inter_host_latency: float = _default("inter_host_latency")
    inter_host_seconds_per_byte: float = _default("inter_host_seconds_per_byte")
    virtual_hosts: Optional[int] = _default("virtual_hosts")
    emulated_bandwidth: Optional[float] = _default("emulated_bandwidth")
    emulated_latency: Optional[float] = _default("emulated_latency")
    calibration_cache_dir: str = _default("calibration_cache_dir")
    timeline: str = _default("timeline")
    debug: bool = _default("debug")
    shared_memory: bool = _default("shared_memory")
    autotune: bool = _default("autotune")
    autotune_log: str = _default("autotune_log")

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None,
                         **overrides: Any) -> "RuntimeSettings":
        """Reads TFDIST_* variables, then applies keyword overrides (init() arguments)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            key = "TFDIST_" + field.name.upper()
            if key in environ and environ[key] != "":
                values[field.name] = _convert(key, environ[key], _TABLE[field.name].type)
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown tfdist setting(s): {', '.join(sorted(unknown))}; "
                              "expected keyword arguments among "
                              f"{', '.join(f.name for f in dataclasses.fields(cls))}")
        values.update({k: _checked_override(k, v, _TABLE[k].type)
                       for k, v in overrides.items() if v is not None})
        # A rank waiting on shared memory would not see a dead peer as MPI's error,
        # which elastic recovery starts from.
        if ulfm_enabled(environ):
            values["shared_memory"] = False
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raises ConfigError naming the first setting that cannot work."""
        algorithms = _library.allreduce_algorithms()
        if self.allreduce_algorithm not in algorithms:
            raise ConfigError(f"TFDIST_ALLREDUCE_ALGORITHM={self.allreduce_algorithm!r}: "
                              f"expected one of {', '.join(algorithms)}")
        for name in ("auto_trials", "fusion_threshold", "cache_capacity"):
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
        pairs: dict[str, Any] = {}
        for setting in _settings_of("runtime"):
            value = getattr(self, setting.name)
            # An unset optional setting is left out: the runtime's 0 means off.
            if value is not None:
                pairs[setting.cpp_key] = int(value) if isinstance(value, bool) else value
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
    tfdistrun. ``elastic``, ``min_np``, ``max_np``, ``host_discovery_script``:
    tfdistrun --elastic and its options (docs/elastic.md);
    ``elastic_spares``: tfdistrun --spares (None: the default, see
    ``spares_wanted``); ``elastic_replacement``: set on the processes elastic
    recovery spawns.
    """

    restart: int = _default("restart")
    preempt_file: str = _default("preempt_file")
    elastic: bool = _default("elastic")
    min_np: Optional[int] = _default("min_np")
    max_np: Optional[int] = _default("max_np")
    host_discovery_script: str = _default("host_discovery_script")
    elastic_spares: Optional[int] = _default("elastic_spares")
    elastic_replacement: bool = _default("elastic_replacement")

    @classmethod
    def from_environment(cls, environ: Optional[Mapping[str, str]] = None) -> "LaunchInfo":
        environ = os.environ if environ is None else environ
        restart = environ.get("TFDIST_RESTART", "") or "0"
        try:
            count = int(restart)
        except ValueError:
            raise ConfigError(f"TFDIST_RESTART={restart!r}: expected a whole number") from None
        def optional(key: str, kind: str) -> Any:
            text = environ.get(key, "")
            return _convert(key, text, kind) if text else None

        return cls(restart=count, preempt_file=environ.get("TFDIST_PREEMPT_FILE", ""),
                   elastic=bool(optional("TFDIST_ELASTIC", "bool")),
                   min_np=optional("TFDIST_MIN_NP", "int"),
                   max_np=optional("TFDIST_MAX_NP", "int"),
                   host_discovery_script=environ.get("TFDIST_HOST_DISCOVERY_SCRIPT", ""),
                   elastic_spares=optional("TFDIST_ELASTIC_SPARES", "int"),
                   elastic_replacement=bool(optional("TFDIST_ELASTIC_REPLACEMENT", "bool")))

    def spares_wanted(self, size: int, environ: Optional[Mapping[str, str]] = None) -> int:
        """How many warm spares a job of ``size`` ranks keeps (docs/elastic.md).

        0 when elastic recovery is off, or when recovery would not spawn
        replacements (--max-np below ``size``, so one failure leaves enough
        ranks); else TFDIST_ELASTIC_SPARES, by default 0 (docs/elastic.md,
        "Warm spares": after a recovery with spares, MPI_Finalize at the job's
        end can wait past the exit guard).
        """
        if self.elastic_off_reason(environ) is not None:
            return 0
        if self.max_np is None or self.max_np < size:
            return 0
        wanted = 0 if self.elastic_spares is None else self.elastic_spares
        if wanted < 0:
            raise ConfigError(f"TFDIST_ELASTIC_SPARES={wanted}: expected a number of spare "
                              "processes, 0 or more")
        return wanted

    def elastic_off_reason(self, environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
        """Why elastic recovery is off in this job, or None when it is on."""
        if not self.elastic:
            return "the job was not started with tfdistrun --elastic"
        if not ulfm_enabled(environ):
            return ("MPI's fault tolerance (ULFM) is off: the job was not started with "
                    "mpirun --with-ft ulfm (tfdistrun --elastic adds it), or this MPI lacks it")
        return None


def ulfm_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether MPI runs with its fault tolerance on (``mpirun --with-ft ulfm``)."""
    environ = os.environ if environ is None else environ
    return environ.get("OMPI_MCA_mpi_ft_enable", "") in ("1", "true", "yes")


_REFERENCE = "docs/reference/settings.md"


def environment_warnings(environ: Optional[Mapping[str, str]] = None) -> List[str]:
    """What init() warns about in the environment: settings that are set but not read.

    A ``TFDIST_*`` variable that is no setting (a misspelt name would otherwise
    change nothing, silently), and a ``HOROVOD_*`` variable that set one of
    tfdist's settings in Horovod (a launch script brought over from Horovod),
    each with the variable to set instead. Empty variables count as unset.
    """
    environ = os.environ if environ is None else environ
    known = {s.variable: s for s in _SETTINGS}
    from_horovod = {s.horovod: s for s in _SETTINGS if s.horovod}
    messages = []
    for key in sorted(environ):
        value = environ[key]
        if value == "":
            continue
        if key.startswith("TFDIST_") and key not in known:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]}?" if close else ""
            messages.append(f"{key} is not a tfdist setting and changes nothing{hint} "
                            f"(every setting: {_REFERENCE})")
        elif key in from_horovod:
            setting = from_horovod[key]
            applies = environ.get(setting.variable, "")
            now = (f"{setting.variable}={applies} applies" if applies
                   else f"set {setting.variable} instead")
            messages.append(f"{key}={value} is Horovod's variable, which tfdist does not "
                            f"read: {now} ({_REFERENCE})")
    return messages
