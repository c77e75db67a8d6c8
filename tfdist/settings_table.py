"""The one table of TFDIST_* settings: name, type, default and meaning.

tfdist/config.py takes its defaults, types and runtime-string keys from here;
``python scripts/settings_reference.py`` (or ``python -m tfdist.settings_table
--markdown``) writes docs/reference/settings.md from it; tests/unit/test_settings_table.py checks config.py, the C++ defaults in
cc/core/runtime/config.h and that page against it. This module imports nothing
beyond the standard library, so it can be read without TensorFlow or the
native library.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Dict, List, Optional, Tuple

#: Where a setting is read: "runtime" (init(), tfdist.config.RuntimeSettings),
#: "launch" (set by tfdistrun for every rank, tfdist.config.LaunchInfo) or
#: "tools" (read by scripts/*.sh and tfdist-bench only).
SCOPES = ("runtime", "launch", "tools")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One TFDIST_* variable.

    ``name`` is the init() keyword argument (runtime settings) or the
    LaunchInfo attribute; the variable is ``TFDIST_`` + ``name.upper()``.
    ``default`` is None when the setting is unset by default (the feature is
    off). Runtime settings also name the key of the "key=value;..." string the
    C++ runtime parses (``cpp_key``), the RuntimeConfig member it fills
    (``cpp_member``) and that member's initialiser in config.h
    (``cpp_default``): the same as ``default`` unless the C++ value differs
    for a reason given in ``cpp_note``.
    """

    name: str
    type: str                    # "str", "int", "float" or "bool"
    default: Any
    meaning: str
    scope: str = "runtime"
    cpp_key: str = ""
    cpp_member: str = ""
    cpp_default: Any = "same"
    cpp_note: str = ""
    # The HOROVOD_* variable that set this in Horovod, where one did: a launch
    # script brought over from Horovod may still set it, and init() says
    # which TFDIST_* variable to set instead (tfdist/config.py).
    horovod: str = ""

    @property
    def variable(self) -> str:
        return "TFDIST_" + self.name.upper()

    @property
    def cpp_expected(self) -> Any:
        """The value config.h's initialiser must have."""
        return self.default if self.cpp_default == "same" else self.cpp_default


_OFF_IN_CPP = "0 in C++ means off; Python passes the key only when the setting is set"

SETTINGS: Tuple[Setting, ...] = (
    Setting("allreduce_algorithm", "str", "auto",
            "Allreduce algorithm when a call names none: `auto` (the cost model chooses "
            "per call) or one of tree, butterfly, ring, rabenseifner, hierarchical, shm, "
            "hierarchical_shm, mpi.",
            cpp_key="algorithm", cpp_member="default_algorithm"),
    Setting("auto_trials", "int", 5,
            "Timed calls of each of its candidates (the algorithms the cost model "
            "predicts within 3x of its pick, then `mpi`, MPI_Allreduce, except over "
            "emulated links, then `shm` where the ranks share memory) that `auto` "
            "makes per size class (bytes "
            "rounded down to a power of two) before it keeps the fastest for the job "
            "(by each one's call a fifth of the way up from its fastest; at two ranks "
            "never the tree). Each timed call follows an untimed one of the same "
            "algorithm, which pays what the previous candidate's call left behind; "
            "0 trusts the cost model. Below 1 KiB `auto` runs `mpi` untimed, except "
            "over emulated links.",
            cpp_key="auto_trials", cpp_member="auto_trials"),
    Setting("fusion_threshold", "int", 64 * 1024 * 1024,
            "Bytes of small tensors packed into one fused allreduce; 0 disables fusion.",
            cpp_key="fusion_threshold", cpp_member="fusion_threshold_bytes",
            horovod="HOROVOD_FUSION_THRESHOLD"),
    Setting("cycle_time", "float", 1.0,
            "Longest pause, in milliseconds, between negotiation rounds while "
            "collectives wait.",
            cpp_key="cycle_time_ms", cpp_member="cycle_time_ms",
            horovod="HOROVOD_CYCLE_TIME"),
    Setting("cache_capacity", "int", 1024,
            "Tensors the response cache remembers; 0 disables it.",
            cpp_key="cache_capacity", cpp_member="cache_capacity",
            horovod="HOROVOD_CACHE_CAPACITY"),
    Setting("stall_check_time", "float", 60.0,
            "Seconds a collective may wait for other ranks before a stall is reported "
            "(then again at doubling intervals).",
            cpp_key="stall_check_seconds", cpp_member="stall_check_seconds",
            horovod="HOROVOD_STALL_CHECK_TIME_SECONDS"),
    Setting("stall_shutdown_time", "float", 600.0,
            "Seconds after which a stalled job aborts on every rank; 0 waits forever. "
            "Longer than any legitimate wait of one rank for another (a rank-0 "
            "evaluation, a checkpoint), short enough that a job that can never finish "
            "ends with a message instead of hanging.",
            cpp_key="stall_shutdown_seconds", cpp_member="stall_shutdown_seconds",
            horovod="HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"),
    Setting("stall_eviction", "bool", None,
            "Past `stall_shutdown_time`, the ranks that keep a collective waiting are "
            "evicted (they exit) and elastic training carries on without them, instead "
            "of the whole job aborting; unset: on under tfdistrun --elastic (with ULFM), "
            "off otherwise (docs/elastic.md).",
            cpp_key="stall_eviction", cpp_member="stall_eviction", cpp_default=False,
            cpp_note=_OFF_IN_CPP),
    Setting("latency", "float", -1.0,
            "The cost model's link latency L within a host, in seconds; negative: "
            "measured at init (step curves) and cached per host.",
            cpp_key="latency_seconds", cpp_member="latency_seconds"),
    Setting("seconds_per_byte", "float", -1.0,
            "The cost model's inverse bandwidth G within a host, in seconds per byte; "
            "negative: measured at init, with `latency`.",
            cpp_key="seconds_per_byte", cpp_member="seconds_per_byte"),
    Setting("reduce_seconds_per_byte", "float", 0.0,
            "Seconds to reduce one byte (R), used with the two above; 0 gives the "
            "textbook formulas.",
            cpp_key="reduce_seconds_per_byte", cpp_member="reduce_seconds_per_byte"),
    Setting("inter_host_latency", "float", -1.0,
            "The cost model's latency L between hosts, in seconds; negative: measured "
            "at init between ranks on different hosts (set both inter-host values or "
            "neither).",
            cpp_key="inter_host_latency_seconds", cpp_member="inter_host_latency_seconds"),
    Setting("inter_host_seconds_per_byte", "float", -1.0,
            "The cost model's inverse bandwidth G between hosts, in seconds per byte; "
            "negative: measured at init.",
            cpp_key="inter_host_seconds_per_byte", cpp_member="inter_host_seconds_per_byte"),
    Setting("virtual_hosts", "int", None,
            "Split the ranks into this many hosts of consecutive ranks (must divide "
            "the number of ranks); unset: the real hosts.",
            cpp_key="virtual_hosts", cpp_member="virtual_hosts", cpp_default=0,
            cpp_note=_OFF_IN_CPP),
    Setting("emulated_bandwidth", "float", None,
            "Emulate every link between hosts at this many bytes per second (> 0); "
            "unset: no emulation.",
            cpp_key="emulated_bandwidth", cpp_member="emulated_bandwidth", cpp_default=0.0,
            cpp_note=_OFF_IN_CPP),
    Setting("emulated_latency", "float", None,
            "Latency in seconds (>= 0) of every emulated link between hosts; needs "
            "`emulated_bandwidth`.",
            cpp_key="emulated_latency", cpp_member="emulated_latency", cpp_default=0.0,
            cpp_note=_OFF_IN_CPP),
    Setting("calibration_cache_dir", "str", "~/.cache/tfdist",
            "Where rank 0 keeps the measured link cost (per host pair and machine "
            "layout; measured again when a quick check at init finds it 1.5x too "
            "slow); empty disables the cache. If rank 0 cannot create it, it warns and "
            "measures at every init.",
            cpp_key="calibration_cache_dir", cpp_member="calibration_cache_dir",
            cpp_default="",
            cpp_note="empty in C++ so that C++ unit tests never cache; Python always "
                     "passes the path"),
    Setting("timeline", "str", "",
            "Write a Chrome trace (open it in Perfetto) to this path; `.<rank>` is "
            "appended when there is more than one rank.",
            cpp_key="timeline", cpp_member="timeline_path",
            horovod="HOROVOD_TIMELINE"),
    Setting("debug", "bool", False,
            "One stderr line per collective (name, size, algorithm).",
            cpp_key="debug_log", cpp_member="debug_log"),
    Setting("shared_memory", "bool", True,
            "Let ranks that share one host reduce through a shared-memory segment: "
            "where every rank is on one host, the `shm` allreduce algorithm, which `auto` "
            "tries beside the others (256 KiB x 2 per rank in /dev/shm); where the job "
            "spans hosts (or TFDIST_VIRTUAL_HOSTS), a segment per host for the "
            "`hierarchical_shm` algorithm, hierarchical with its phases within a host on "
            "it, which `auto` tries from 4 MiB (1 MiB x 2 per rank). 0 turns both off; they are "
            "off under MPI fault tolerance (ULFM), where a failed peer must surface as "
            "MPI's error.",
            cpp_key="shared_memory", cpp_member="shared_memory"),
    Setting("autotune", "bool", False,
            "Tune DistributedOptimizer's gradient grouping (when num_groups is not given), "
            "the fusion threshold, the cycle time and per-size allreduce algorithms "
            "over the first 50 training steps, every rank switching at the same step; "
            "keeps the defaults unless a candidate is measurably faster (docs/runtime.md, "
            "Autotuning). Must be the same on every rank.",
            cpp_key="autotune", cpp_member="autotune",
            horovod="HOROVOD_AUTOTUNE"),
    Setting("autotune_log", "str", "",
            "With `autotune`: write a CSV of the settings tried and their median step "
            "time to this path (`.<rank>` appended when there is more than one rank).",
            cpp_key="autotune_log", cpp_member="autotune_log_path",
            horovod="HOROVOD_AUTOTUNE_LOG"),
    Setting("restart", "int", 0,
            "Set by tfdistrun --restarts: 0 on the job's first run, n on its n-th "
            "restart.", scope="launch"),
    Setting("preempt_file", "str", "",
            "Set by tfdistrun: the file it creates when asked to stop (SIGTERM); empty "
            "when not launched by tfdistrun.", scope="launch"),
    Setting("elastic", "bool", False,
            "Set by tfdistrun --elastic: the job runs under MPI's fault tolerance (ULFM), "
            "and tfdist.elastic.run recovers from failed ranks instead of stopping.",
            scope="launch"),
    Setting("min_np", "int", None,
            "Set by tfdistrun --min-np: elastic recovery ends the job with an error when "
            "fewer ranks than this survive; unset: 1.", scope="launch"),
    Setting("max_np", "int", None,
            "Set by tfdistrun --max-np (default: -np): elastic recovery spawns "
            "replacements back up to this many ranks; unset: no replacements.",
            scope="launch"),
    Setting("host_discovery_script", "str", "",
            "Set by tfdistrun --host-discovery-script: a program that prints the hosts "
            "replacements may go to, one `host[:slots]` a line; empty: the surviving "
            "hosts (MPI's choice).", scope="launch"),
    Setting("elastic_spares", "int", None,
            "Set by tfdistrun --spares: how many warm spare processes (TensorFlow "
            "already imported, waiting without training) rank 0 keeps for elastic "
            "recovery to merge in instead of starting replacements, when --max-np allows "
            "regrowth; unset: 0 (docs/elastic.md, Warm spares).", scope="launch"),
    Setting("elastic_replacement", "bool", False,
            "Set by elastic recovery on the replacement processes it spawns: their "
            "tfdist.init() joins the survivors instead of starting a new job.",
            scope="launch"),
    Setting("venv", "str", ".venv",
            "The virtualenv scripts/env.sh and scripts/setup.sh use, absolute or "
            "relative to the repository.", scope="tools"),
    Setting("build_jobs", "int", None,
            "Parallel compiler jobs of `pip install .` (build_support/native.py); unset: "
            "one per core.", scope="tools"),
    Setting("test_seed", "int", None,
            "The seed of the tests' generated cases (the checkpoint tests print the seed "
            "they drew, so a failure can be rerun with it); unset: a new one each run.",
            scope="tools"),
    Setting("source", "str", "",
            "tfdist's repository root for `tfdist-bench` (the folder that holds "
            "benchmarks/); empty: the installed tree, then the current directory and "
            "its parents.", scope="tools"),
)

BY_NAME: Dict[str, Setting] = {s.name: s for s in SETTINGS}


def settings(scope: str) -> List[Setting]:
    """The settings of one scope, in table order."""
    if scope not in SCOPES:
        raise ValueError(f"unknown settings scope {scope!r}: expected one of {SCOPES}")
    return [s for s in SETTINGS if s.scope == scope]


def _cell(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if value == "":
        return "empty"
    return f"`{value}`"


_HEADINGS = {
    "runtime": ("Runtime settings",
                "Read once, from the environment, at `init()`; a keyword argument of "
                "`init()` with the name in the first column wins "
                "(`init(fusion_threshold=0)`). An empty variable counts as unset. "
                "The algorithm, fusion, cache, autotune and link-cost settings decide "
                "which collectives run, so every rank must use the same values: `init()` "
                "compares them and, if they differ, raises `InitError` on every rank "
                "naming the setting, the rank and both values. Booleans accept "
                "1/true/yes/on and 0/false/no/off. `init()` warns (on rank 0) about a "
                "`TFDIST_*` variable that is no setting, suggesting the closest name, and "
                "about a Horovod variable from the last column, naming the variable to "
                "set instead: tfdist reads no `HOROVOD_*` variable."),
    "launch": ("Set by the launcher",
               "`tfdistrun` sets these for every rank; read them with "
               "`tfdist.config.LaunchInfo.from_environment()`."),
    "tools": ("Read by the scripts, the build, the tests and tfdist-bench",
              "Only scripts/*.sh, the build, the tests and `tfdist-bench` read these; the "
              "library does not."),
}


def markdown() -> str:
    """docs/reference/settings.md."""
    lines = ["# Settings", "",
             "<!-- Generated from tfdist/settings_table.py by "
             "`python scripts/settings_reference.py`; do not edit. -->", "",
             "Every `TFDIST_*` environment variable tfdist reads. All have working "
             "defaults.", ""]
    for scope in SCOPES:
        title, intro = _HEADINGS[scope]
        horovod = any(s.horovod for s in settings(scope))
        lines += [f"## {title}", "", intro, "",
                  "| variable | name | type | default | meaning |"
                  + (" in Horovod |" if horovod else ""),
                  "|---|---|---|---|---|" + ("---|" if horovod else "")]
        for s in settings(scope):
            lines.append(f"| `{s.variable}` | `{s.name}` | {s.type} | {_cell(s.default)} "
                         f"| {s.meaning} |"
                         + ((f" `{s.horovod}` |" if s.horovod else " |") if horovod else ""))
        lines.append("")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["--markdown"]:
        print("usage: python -m tfdist.settings_table --markdown > docs/reference/settings.md",
              file=sys.stderr)
        return 2
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
