"""tfdist.elastic's errors and run() when elastic recovery is off: no MPI job, no library."""
import importlib
import warnings
from pathlib import Path

import pytest

from tfdist.elastic import errors, membership
from tfdist.elastic.errors import RANKS_CHANGED_MARKER, RanksChangedError, is_ranks_changed

# The module, not the decorator tfdist.elastic exports under the same name.
run_module = importlib.import_module("tfdist.elastic.run")
ROOT = Path(__file__).resolve().parents[2]


def test_the_marker_matches_the_native_librarys():
    header = (ROOT / "cc" / "mpi" / "mpi_error.h").read_text()
    assert f'kRanksChangedMarker[] = "{RANKS_CHANGED_MARKER}"' in header


def test_a_marked_error_is_a_membership_change_and_others_are_not():
    marked = RuntimeError("tfdist: MPI_Testall failed ...: MPI_ERR_REVOKED; rank 2 has failed "
                          f"{RANKS_CHANGED_MARKER} the job's membership changed")
    assert is_ranks_changed(marked)
    assert is_ranks_changed(RanksChangedError())
    assert not is_ranks_changed(RuntimeError("tfdist: shapes differ between ranks"))
    converted = errors.as_ranks_changed(marked)
    assert isinstance(converted, RanksChangedError)
    assert "rank 2 has failed" in str(converted)
    # Outside run() the message says what happened and what to do.
    assert "membership changed" in str(converted) and "restart" in str(converted)


def test_without_elastic_run_calls_once_and_says_why(monkeypatch):
    monkeypatch.delenv("TFDIST_ELASTIC", raising=False)
    monkeypatch.setattr(run_module._warn_once, "said", False, raising=False)
    calls = []

    @run_module.run
    def train(state, extra):
        calls.append((state, extra))
        return "result"

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert train("state", extra=1) == "result"
        assert train("state", extra=2) == "result"
    assert calls == [("state", 1), ("state", 2)]
    texts = [str(w.message) for w in seen]
    assert len(texts) == 1, texts  # once per process
    assert "not started with tfdistrun --elastic" in texts[0]


def test_without_elastic_a_membership_change_ends_the_call_as_ranks_changed(monkeypatch):
    monkeypatch.delenv("TFDIST_ELASTIC", raising=False)

    @run_module.run
    def train(state):
        raise RuntimeError(f"allreduce failed {RANKS_CHANGED_MARKER} ...")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RanksChangedError, match="tfdistrun --restarts"):
            train(None)


def test_elastic_without_ulfm_is_off_and_says_so(monkeypatch):
    monkeypatch.setenv("TFDIST_ELASTIC", "1")
    monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)
    assert "ULFM" in membership.elastic_off_reason()
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "1")
    assert membership.elastic_off_reason() is None


class _OneRank:
    """The survivors' communicator of a one-rank job, for the host discovery helper."""

    def Get_rank(self) -> int:
        return 0

    def bcast(self, value, root=0):
        return value


def _script(tmp_path, text: str) -> str:
    path = tmp_path / "discover.sh"
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def test_host_discovery_deals_replacements_over_the_slots(tmp_path):
    from tfdist.elastic import membership
    script = _script(tmp_path, "echo '# hosts'\necho a:2\necho\necho b\n")
    assert membership._hosts_for(script, 5, _OneRank()) == ["a", "a", "b", "a", "a"]
    assert membership._hosts_for("", 2, _OneRank()) == []


@pytest.mark.parametrize("text, message", [
    ("exit 3\n", "failed"),
    ("echo '# nothing'\n", "printed no hosts"),
    ("echo a:x\n", "expected host or host:slots"),
    ("echo a:0\n", "expected host or host:slots"),
])
def test_a_bad_host_discovery_script_is_named(tmp_path, text, message):
    from tfdist.elastic import ElasticJobError, membership
    script = _script(tmp_path, text)
    with pytest.raises(ElasticJobError, match=message) as raised:
        membership._hosts_for(script, 1, _OneRank())
    assert script in str(raised.value)
