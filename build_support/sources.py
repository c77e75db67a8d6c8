"""The one description of tfdist's C++ build: which sources, which flags.

Read by cc/Makefile (the unit tests, through ``python -m build_support.sources
make``, which prints make variables), by build_support/native.py (the
library) and by benchmarks/_engine.py (the timing library). Sources are found
by folder, one folder per layer (scripts/check_layers.py keeps the layers
apart), so a new file needs no edit here.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CC = ROOT / "cc"

#: Every build: the language and the warnings, which are errors everywhere.
COMMON_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{ROOT}"]
#: The unit tests' build (cc/Makefile test).
TEST_FLAGS = [*COMMON_FLAGS, "-O3"]
#: cc/Makefile sanitize: AddressSanitizer and UndefinedBehaviorSanitizer.
SANITIZE_FLAGS = [*COMMON_FLAGS, "-O1", "-g", "-fsanitize=address,undefined",
                  "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]
#: cc/Makefile tsan. -O1 keeps the threads-as-ranks tests quick; TSan needs no
#: frame pointers.
TSAN_FLAGS = [*COMMON_FLAGS, "-O1", "-g", "-fsanitize=thread"]
#: A shared library (libtfdist.so; the benchmarks' timing library adds
#: -fvisibility=hidden), before TensorFlow's and MPI's flags.
LIBRARY_FLAGS = [*COMMON_FLAGS, "-O3", "-fPIC", "-DNDEBUG", "-fvisibility-inlines-hidden"]


def _in(folder: str) -> list[Path]:
    return sorted((CC / folder).rglob("*.cc"))


def core_sources() -> list[Path]:
    """cc/core: no MPI, no TensorFlow."""
    return _in("core")


def testing_sources() -> list[Path]:
    """cc/testing: the in-process transport (threads as ranks)."""
    return _in("testing")


def mpi_sources() -> list[Path]:
    """cc/mpi: every file that includes <mpi.h>."""
    return _in("mpi")


def tf_sources() -> list[Path]:
    """cc/tf: the only C++ that sees TensorFlow."""
    return _in("tf")


def unit_test_sources() -> list[Path]:
    """The C++ unit tests' binary: the core, the in-process transport and cc/tests."""
    return [*core_sources(), *testing_sources(), *_in("tests")]


def library_sources() -> list[Path]:
    """libtfdist.so: everything but the unit tests."""
    return [*core_sources(), *mpi_sources(), *testing_sources(), *tf_sources()]


def engine_sources() -> list[Path]:
    """What benchmarks/native's timers link against: the algorithms, the cost
    model and the transports (MPI's included), not the runtime."""
    runtime = [CC / "core" / "runtime", CC / "core" / "tuning" / "calibration.cc",
               CC / "mpi" / "mpi_runtime.cc"]
    return [path for path in [*core_sources(), *mpi_sources(), *testing_sources()]
            if not any(path == left or left in path.parents for left in runtime)]


def make_variables() -> str:
    """The sources (relative to cc/) and flags as make variables, for cc/Makefile."""
    def relative(paths: list[Path]) -> str:
        return " ".join(path.relative_to(CC).as_posix() for path in paths)
    lines = {
        "CORE_SOURCES": relative([*core_sources(), *testing_sources()]),
        "TEST_SOURCES": relative(_in("tests")),
        "CXXFLAGS": " ".join(TEST_FLAGS),
        "SANITIZE_FLAGS": " ".join(SANITIZE_FLAGS),
        "TSAN_FLAGS": " ".join(TSAN_FLAGS),
    }
    return "".join(f"{name} := {value}\n" for name, value in lines.items())


if __name__ == "__main__":
    if sys.argv[1:] != ["make"]:
        sys.exit("usage: python -m build_support.sources make")
    sys.stdout.write(make_variables())
