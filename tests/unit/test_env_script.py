"""scripts/env.sh puts the virtualenv on PATH from any directory, not only the repository root."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV_SH = ROOT / "scripts" / "env.sh"


def source_from(directory: Path, venv=None):
    """Sources env.sh in a bash started in ``directory``; returns (PATH entries, stderr)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    if venv is not None:
        env["TFDIST_VENV"] = str(venv)
    result = subprocess.run(
        ["bash", "-c", f'source "{ENV_SH}" && echo "$PATH" && command -v tfdistrun || true'],
        cwd=str(directory), env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    return lines[0].split(":"), lines[1:], result.stderr


def fake_venv(directory: Path) -> Path:
    (directory / "bin").mkdir(parents=True)
    tool = directory / "bin" / "tfdistrun"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    return directory


def test_an_absolute_venv_is_used_as_it_is(tmp_path):
    venv = fake_venv(tmp_path / "elsewhere" / "venv")
    path, found, errors = source_from(tmp_path, venv)
    assert path[0] == str(venv / "bin")
    assert found == [str(venv / "bin" / "tfdistrun")]
    assert errors == ""


@pytest.mark.parametrize("where", ["/", "scripts", "docs"])
def test_a_relative_venv_is_found_from_the_repository_wherever_the_shell_is(where):
    directory = Path(where) if where == "/" else ROOT / where
    path, _, _ = source_from(directory, "some-venv")
    assert path[0] == str(ROOT / "some-venv" / "bin")
    path, _, _ = source_from(directory)
    assert path[0] == str(ROOT / ".venv" / "bin")


def test_a_missing_venv_is_said_not_silently_put_on_path(tmp_path):
    _, found, errors = source_from(tmp_path, tmp_path / "no-such-venv")
    assert "no virtualenv at" in errors and "setup.sh" in errors, errors
    assert found == []
