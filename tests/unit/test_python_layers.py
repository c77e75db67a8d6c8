"""The Python package's layering: imports go one way, and the checkpoint file format
imports without TensorFlow; no MPI, no library calls (parsing, and two short
subprocesses)."""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tfdist"

#: module (and its submodules) -> (the tfdist modules it may import, or None for
#: any but the forbidden; the tfdist modules it may not import). Targets match
#: by prefix: "tfdist.compression" is the package and all its modules.
RULES: Dict[str, Tuple[Optional[Set[str]], Set[str]]] = {
    # Imported by tfdist/__init__ before anything else, and by the TF-free imports.
    "tfdist._reduce_ops": (set(), set()),
    "tfdist._arguments": ({"tfdist._reduce_ops"}, set()),
    "tfdist._library": (set(), set()),
    "tfdist.settings_table": (set(), set()),
    "tfdist.config": ({"tfdist._library", "tfdist.settings_table"}, set()),
    # The file format must stay importable without TensorFlow or the library.
    "tfdist.checkpoint.direct_io": (set(), set()),
    "tfdist.checkpoint.file_format": ({"tfdist.checkpoint.direct_io"}, set()),
    "tfdist.checkpoint.errors": (set(), set()),
    # ops wraps the TensorFlow ops and knows nothing above it.
    "tfdist.ops": (None, {"tfdist.compression", "tfdist.collectives", "tfdist.gradient_tape",
                          "tfdist.keras", "tfdist.checkpoint", "tfdist.functions",
                          "tfdist.preemption", "tfdist._api"}),
    "tfdist.gradients": (None, {"tfdist.compression", "tfdist.collectives", "tfdist.keras",
                                "tfdist.checkpoint", "tfdist._api"}),
    # Compressors are built from ops; the collectives that take compression= sit above.
    "tfdist.compression": (None, {"tfdist.collectives", "tfdist.gradient_tape", "tfdist.keras",
                                  "tfdist.checkpoint", "tfdist.functions", "tfdist._api"}),
    "tfdist.collectives": (None, {"tfdist.gradient_tape", "tfdist.keras", "tfdist.checkpoint",
                                  "tfdist._api"}),
    "tfdist.gradient_tape": (None, {"tfdist.keras", "tfdist.checkpoint", "tfdist._api"}),
    # The set registry sits just above the runtime: every collective's module uses it.
    "tfdist.process_sets": ({"tfdist._communicator", "tfdist._library", "tfdist.runtime"},
                            set()),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> Iterator[Tuple[str, Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield _module_name(path), path, ast.parse(path.read_text(), str(path))


def _is_tfdist(name: Optional[str]) -> bool:
    return bool(name) and (name == "tfdist" or name.startswith("tfdist."))


def _imported(node: ast.AST) -> Set[str]:
    """The tfdist modules an Import/ImportFrom node names (``from tfdist import ops``
    names tfdist.ops when that is a module, else tfdist)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if _is_tfdist(alias.name)}
    if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_tfdist(node.module):
        found = set()
        for alias in node.names:
            candidate = ROOT.joinpath(*f"{node.module}.{alias.name}".split("."))
            is_module = (candidate.with_suffix(".py").exists()
                         or (candidate / "__init__.py").exists())
            found.add(f"{node.module}.{alias.name}" if is_module else node.module)
        return found
    return set()


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _rule(module: str) -> Optional[Tuple[Optional[Set[str]], Set[str]]]:
    keys = [k for k in RULES if _matches(module, k)]
    return RULES[max(keys, key=len)] if keys else None


def test_no_function_level_tfdist_imports():
    """A tfdist import inside a function hides an import cycle; the layers go one way."""
    found = []
    for module, path, tree in _sources():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                for name in _imported(node):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {function.name}() "
                                 f"imports {name}")
    assert not found, "function-level tfdist imports:\n" + "\n".join(found)


def test_imports_follow_the_layers():
    """Each module imports only what RULES lets it: ops never imports compression,
    compression never the collectives above it, the file format nothing with TensorFlow."""
    assert {"tfdist.ops", "tfdist.collectives", "tfdist.compression.topk",
            "tfdist.compression.powersgd", "tfdist.checkpoint.file_format"} <= {
        module for module, _, _ in _sources()}, "the layers this test names have moved"
    broken = []
    for module, path, tree in _sources():
        rule = _rule(module)
        if rule is None:
            continue
        allowed, forbidden = rule
        for node in ast.walk(tree):
            for name in _imported(node):
                if _matches(name, module):
                    continue  # a package importing its own modules
                bad = (any(_matches(name, f) for f in forbidden) if allowed is None
                       else not any(_matches(name, a) for a in allowed))
                if bad:
                    broken.append(f"{path.relative_to(ROOT)}:{node.lineno} {module} imports {name}")
    assert not broken, "imports against the layering:\n" + "\n".join(broken)


def _python(code: str, path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(path), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=path, capture_output=True,
                          text=True, timeout=120)


def test_file_format_imports_without_tensorflow():
    """Tools read checkpoint files without TensorFlow: the file format's import loads
    neither TensorFlow nor the rest of tfdist."""
    result = _python(
        "import sys\n"
        "import tfdist.checkpoint.file_format\n"
        "heavy = sorted(m for m in sys.modules if m == 'tensorflow' or m == 'keras'\n"
        "               or m.startswith(('tfdist.ops', 'tfdist._library', 'tfdist._api')))\n"
        "print('loaded:', heavy)\n", ROOT)
    assert result.returncode == 0, result.stderr
    assert "loaded: []" in result.stdout, result.stdout


def test_import_tfdist_fails_without_the_library_but_the_file_format_does_not(tmp_path):
    """Without the native library, the first use of tfdist's API and ``import tfdist.keras``
    fail with the rebuild message; the file format alone does not need it."""
    shutil.copytree(PACKAGE, tmp_path / "tfdist", ignore=shutil.ignore_patterns(
        "lib", "__pycache__"))
    result = _python(
        "import tfdist.checkpoint.file_format\n"
        "print('file format: ok')\n", tmp_path)
    assert result.returncode == 0 and "file format: ok" in result.stdout, result.stderr
    for statement in ("import tfdist; tfdist.init", "import tfdist.keras"):
        result = _python(statement, tmp_path)
        assert result.returncode != 0, f"{statement} succeeded without the library"
        assert "LibraryError" in result.stderr and "Rebuild tfdist" in result.stderr, \
            result.stderr[-2000:]
