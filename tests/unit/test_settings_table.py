"""tfdist/settings_table.py is the one source of every TFDIST_* setting: config.py's
defaults and types, the C++ defaults in cc/core/runtime/config.h, the keys
cc/core/runtime/config.cc parses, the scripts' defaults and docs/reference/settings.md
must all agree with it. No MPI, no native library."""
from __future__ import annotations

import ast
import dataclasses
import operator
import os
import re
from pathlib import Path
from typing import Any, Dict

import pytest

from tfdist import settings_table
from tfdist.settings_table import SETTINGS, settings

ROOT = Path(__file__).resolve().parents[2]
CONFIG_H = ROOT / "cc" / "core" / "runtime" / "config.h"
CONFIG_CC = ROOT / "cc" / "core" / "runtime" / "config.cc"

# A member of struct RuntimeConfig: "type name = initialiser;" or "std::string name;".
_MEMBER = re.compile(r"^\s+([\w:]+)\s+(\w+)\s*(?:=\s*([^;]+))?;", re.M)
_BINARY = {ast.LShift: operator.lshift, ast.Mult: operator.mul, ast.Add: operator.add}


def _integer_expression(text: str) -> int:
    """A C++ integer initialiser such as ``64 << 20`` (literals and << * + only)."""
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"config.h initialiser {text!r} is not a plain integer expression")
    return value(ast.parse(text.strip(), mode="eval").body)


def cpp_defaults(header: str) -> Dict[str, Any]:
    """RuntimeConfig's members and their initial values, as Python values."""
    body = header[header.index("struct RuntimeConfig {"):]
    body = body[:body.index("static Status Parse")]
    body = re.sub(r"//[^\n]*", "", body)
    members: Dict[str, Any] = {}
    for kind, name, init in _MEMBER.findall(body):
        init = init.strip()
        if kind == "std::string":
            members[name] = ast.literal_eval(init) if init else ""
        elif kind == "bool":
            members[name] = {"true": True, "false": False}[init]
        elif kind == "double":
            members[name] = float(init)
        elif kind in ("int", "size_t"):
            members[name] = _integer_expression(init)
        elif kind == "AllreduceAlgorithm":
            # AllreduceAlgorithm::kAuto is the algorithm named "auto".
            members[name] = init.split("::k")[-1].lower()
        else:
            raise AssertionError(f"config.h: member {name} has a type ({kind}) this test "
                                 "cannot read; teach cpp_defaults")
    return members


def test_names_are_unique_and_scoped():
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for s in SETTINGS:
        assert s.scope in settings_table.SCOPES, s
        assert s.type in ("str", "int", "float", "bool"), s
        assert s.default is None or type(s.default).__name__ == s.type, s
        assert s.meaning.strip(), s
        assert bool(s.cpp_key) == (s.scope == "runtime"), s


def test_config_py_fields_types_and_defaults_follow_the_table(monkeypatch):
    from tfdist.config import LaunchInfo, RuntimeSettings
    for cls, scope in ((RuntimeSettings, "runtime"), (LaunchInfo, "launch")):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        table = {s.name: s for s in settings(scope)}
        assert list(fields) == list(table), f"{cls.__name__} fields differ from the table"
        for name, field in fields.items():
            s = table[name]
            wanted = s.type if s.default is not None else f"Optional[{s.type}]"
            assert field.type == wanted, (name, field.type, wanted)
            default = field.default
            if name == "calibration_cache_dir":
                assert default == os.path.expanduser(s.default)
            else:
                assert default == s.default and type(default) is type(s.default), name
    # What the environment actually yields when nothing is set is the same.
    empty = RuntimeSettings.from_environment({})
    for s in settings("runtime"):
        if s.name != "calibration_cache_dir":
            assert getattr(empty, s.name) == s.default, s.name


def test_cpp_defaults_follow_the_table():
    members = cpp_defaults(CONFIG_H.read_text())
    runtime = settings("runtime")
    assert sorted(members) == sorted(s.cpp_member for s in runtime), \
        "RuntimeConfig members and the table's runtime settings differ"
    for s in runtime:
        got, wanted = members[s.cpp_member], s.cpp_expected
        assert got == wanted, (f"config.h: {s.cpp_member} = {got!r}, table says {wanted!r} "
                               f"({s.variable}; {s.cpp_note or 'same as the Python default'})")


def test_cpp_parser_reads_every_key_into_its_member():
    source = CONFIG_CC.read_text()
    parsed = dict(re.findall(r'key == "(\w+)"\)\s*\{(.*?)\}\s*else', source, re.S))
    runtime = settings("runtime")
    assert sorted(parsed) == sorted(s.cpp_key for s in runtime)
    for s in runtime:
        assert f"config.{s.cpp_member}" in parsed[s.cpp_key], (s.cpp_key, s.cpp_member)


def test_runtime_string_uses_the_table_keys():
    from tfdist.config import RuntimeSettings
    text = RuntimeSettings.from_environment(
        {"TFDIST_VIRTUAL_HOSTS": "2", "TFDIST_STALL_EVICTION": "1", "TFDIST_EMULATED_BANDWIDTH": "1e9",
         "TFDIST_EMULATED_LATENCY": "0"}).to_runtime_string()
    keys = [item.split("=", 1)[0] for item in text.split(";")]
    assert keys == [s.cpp_key for s in settings("runtime")]


def test_scripts_default_venv_follows_the_table():
    venv = settings_table.BY_NAME["venv"].default
    for script in ("env.sh", "setup.sh"):
        assert "${TFDIST_VENV:-" + venv + "}" in (ROOT / "scripts" / script).read_text()


def test_every_variable_the_code_reads_is_in_the_table():
    """A new TFDIST_* variable in the library, launcher or scripts needs a table row."""
    known = {s.variable for s in SETTINGS}
    sources = [ROOT / "tfdistrun.py", ROOT / "tfdist_bench.py",
               *(ROOT / "tfdist").rglob("*.py"), *(ROOT / "scripts").glob("*.sh"),
               *(ROOT / "build_support").glob("*.py")]
    found = set()
    for path in sources:
        found |= set(re.findall(r"\bTFDIST_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    assert found <= known, f"not in tfdist/settings_table.py: {sorted(found - known)}"


def test_reference_page_is_generated_from_the_table():
    page = ROOT / "docs" / "reference" / "settings.md"
    assert page.read_text() == settings_table.markdown(), \
        "docs/reference/settings.md is stale: run python scripts/settings_reference.py"


def test_readme_links_the_reference_instead_of_repeating_it():
    readme = (ROOT / "README.md").read_text()
    assert "docs/reference/settings.md" in readme
    assert "| `TFDIST_FUSION_THRESHOLD` |" not in readme


@pytest.mark.parametrize("header, message", [
    ("struct RuntimeConfig {\n  size_t fusion_threshold_bytes = 32 << 20;\n"
     "  static Status Parse", "fusion_threshold_bytes"),
])
def test_a_changed_cpp_default_is_caught(header, message):
    """The check reads the initialisers it compares (it is not vacuous)."""
    members = cpp_defaults(header)
    assert members == {message: 32 << 20}
    assert members[message] != settings_table.BY_NAME["fusion_threshold"].cpp_expected
