"""Checkpoint files under crashes and damage, without MPI: the writer and the verifier alone.

Each trial runs tests/workers/checkpoint_writer_child.py in its own process
(h5py and numpy only, no TensorFlow, so a trial is cheap). The expected
values are regenerated here from the step number, independently of the
file that is read back.
"""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from mpi_harness import WORKERS
from workers.checkpoint_writer_child import expected_contents

CHILD = str(WORKERS / "checkpoint_writer_child.py")
SEED = int(os.environ.get("TFDIST_TEST_SEED", random.randrange(1 << 30)))


def load_file_format():
    """tfdist/checkpoint/file_format.py of the installed tfdist, loaded without TensorFlow."""
    import importlib.util
    from pathlib import Path
    root = Path(importlib.util.find_spec("tfdist").submodule_search_locations[0])
    spec = importlib.util.spec_from_file_location("tfdist_checkpoint_file_format",
                                                  root / "checkpoint" / "file_format.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


FILE_FORMAT = load_file_format()


def same(a, b):
    import numpy as np
    return (a.step == b.step and a.extra == b.extra and a.world_size == b.world_size
            and all(all(x.dtype == y.dtype and np.array_equal(x, y)
                        for x, y in zip(a.groups[g], b.groups[g])) for g in b.groups)
            and all(np.array_equal(x["residual"], y["residual"])
                    for x, y in zip(a.rank_states, b.rank_states)))


@pytest.mark.parametrize("trial", range(20))
def test_a_writer_killed_at_a_random_moment_leaves_the_last_durable_checkpoint(tmp_path, trial):
    mode = "blocking" if trial % 2 == 0 else "background"
    rng = random.Random(SEED * 100 + trial)
    child = subprocess.Popen([sys.executable, CHILD, str(tmp_path), mode],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.6))
    finally:
        child.send_signal(signal.SIGKILL)
        output, _ = child.communicate(timeout=30)
    durable = [int(line.split()[1]) for line in output.splitlines() if line.startswith("durable")]
    path, contents, failures = FILE_FORMAT.newest_valid(str(tmp_path))
    context = f"seed {SEED}, trial {trial} ({mode}), durable steps {durable[-3:]}"
    assert failures == [], context  # a killed write never leaves a file under a final name
    if durable:
        assert path is not None and contents.step >= durable[-1], context
    if path is not None:
        assert same(contents, expected_contents(FILE_FORMAT, contents.step)), context


def test_truncated_or_flipped_checkpoints_are_never_loaded_as_other_values(tmp_path):
    result = subprocess.run([sys.executable, CHILD, str(tmp_path), "damage", str(SEED), "40"],
                            capture_output=True, text=True, timeout=120)
    report = f"seed {SEED}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
    assert result.returncode == 0, report
    lines = result.stdout.splitlines()
    assert len(lines) == 40, report
    # Every truncation is caught; a flip either lands where it matters (caught)
    # or in bytes HDF5 never reads (the values are then exactly the saved ones).
    assert all("fell back" in line for line in lines if "truncate" in line), report
    assert any("fell back" in line for line in lines if "flip" in line), report


def as_version_1(path):
    """Rewrites a checkpoint as format version 1 wrote it: fletcher32 chunks, no CRC-32s."""
    import json
    import h5py
    with h5py.File(path, "r+") as handle:
        manifest = json.loads(handle.attrs["manifest"])
        datasets = []
        handle.visititems(lambda name, item: datasets.append(name)
                          if isinstance(item, h5py.Dataset) else None)
        for name in datasets:
            data = handle[name][()]
            del handle[name]
            handle.create_dataset(name, data=data, chunks=(max(1, data.size // 3),),
                                  fletcher32=True)
        for entries in list(manifest["groups"].values()) + manifest["rank_state"]:
            for entry in entries:
                del entry["crc32"]
        text = json.dumps(manifest, sort_keys=True)
        handle.attrs["format_version"] = 1
        handle.attrs["manifest"] = text
        handle.attrs["digest"] = FILE_FORMAT.manifest_digest(text)


def test_version_1_files_with_fletcher32_still_read_and_a_flip_in_their_data_is_caught(tmp_path):
    import numpy as np
    saved = expected_contents(FILE_FORMAT, 3)
    path = str(tmp_path / FILE_FORMAT.file_name(3))
    FILE_FORMAT.write(path, saved)
    as_version_1(path)
    assert same(FILE_FORMAT.read(path), expected_contents(FILE_FORMAT, 3))
    data = bytearray(open(path, "rb").read())
    where = data.find(np.ascontiguousarray(saved.groups["model"][0]).tobytes()[:64])
    assert where > 0
    data[where + 10] ^= 0x40
    open(path, "wb").write(bytes(data))
    with pytest.raises(FILE_FORMAT.CorruptCheckpoint):
        FILE_FORMAT.read(path)
