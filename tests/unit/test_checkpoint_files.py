"""Checkpoint files under crashes and damage, without MPI: the writer and the verifier alone.

Each trial runs tests/workers/checkpoint_writer_child.py in its own process
(h5py and numpy only, no TensorFlow, so a trial is cheap). The expected
values are regenerated here from the step number, independently of the
file that is read back.
"""
import mmap
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from mpi_harness import TFDIST_PACKAGE, WORKERS
from workers.checkpoint_writer_child import expected_contents

CHILD = str(WORKERS / "checkpoint_writer_child.py")
SEED = int(os.environ.get("TFDIST_TEST_SEED", random.randrange(1 << 30)))


def load_file_format():
    """tfdist/checkpoint/file_format.py of the installed tfdist, loaded without TensorFlow."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("tfdist_checkpoint_file_format",
                                                  TFDIST_PACKAGE / "checkpoint" / "file_format.py")
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


def test_the_crc32_is_zlibs_whichever_library_computes_it():
    """Files stay readable where isal is missing: the CRC-32 is zlib's, bit for bit."""
    import zlib
    import numpy as np
    rng = np.random.RandomState(SEED)
    for dtype, shape in [("float32", (1000, 37)), ("int64", ()), ("uint8", (5_000_001,)),
                         ("float64", (0,)), ("float16", (3, 1, 2))]:
        array = (rng.standard_normal(shape) * 100).astype(dtype)
        assert FILE_FORMAT._crc32(array) == zlib.crc32(array.tobytes()), (dtype, shape)
    piecewise = 0
    data = rng.standard_normal(3_000_000).astype(np.float32)
    for _, piece in FILE_FORMAT._slices(data):
        piecewise = FILE_FORMAT._crc32_update(piece.view(np.uint8), piecewise)
    assert piecewise == zlib.crc32(data.tobytes())


def test_read_into_buffers_uses_those_that_fit_and_still_verifies(tmp_path):
    import numpy as np
    saved = expected_contents(FILE_FORMAT, 4)
    path = str(tmp_path / FILE_FORMAT.file_name(4))
    FILE_FORMAT.write(path, saved)
    model = saved.groups["model"]
    buffers = {"model": [np.full_like(model[0], 7), np.zeros(model[1].size + 1, model[1].dtype),
                         np.zeros_like(model[2])]}
    contents = FILE_FORMAT.read(path, buffers)
    assert same(contents, expected_contents(FILE_FORMAT, 4))
    assert np.shares_memory(contents.groups["model"][0], buffers["model"][0])  # fits: used
    assert not np.shares_memory(contents.groups["model"][1], buffers["model"][1])  # size differs
    # A flipped byte is caught when reading into buffers too.
    data = bytearray(open(path, "rb").read())
    where = data.find(np.ascontiguousarray(model[0]).tobytes()[:64])
    data[where + 1000] ^= 0x01
    open(path, "wb").write(bytes(data))
    with pytest.raises(FILE_FORMAT.CorruptCheckpoint, match="CRC-32"):
        FILE_FORMAT.read(path, buffers)


def _mixed_layout_contents():
    """Arrays for every path of the writer: page-aligned and large (O_DIRECT), large but
    not aligned (the cache), a length that leaves a partial last block, and small."""
    import ml_dtypes
    import numpy as np
    direct_io = FILE_FORMAT.direct_io
    rng = np.random.RandomState(SEED)
    aligned = direct_io.aligned_empty((700, 1024), np.float32)
    aligned[:] = rng.standard_normal(aligned.shape)
    assert aligned.ctypes.data % direct_io.ALIGNMENT == 0
    unaligned = np.empty(300_001 * 8 + 8, np.uint8)[8:].view(np.float64)
    unaligned[:] = rng.standard_normal(unaligned.size)
    assert unaligned.ctypes.data % direct_io.ALIGNMENT != 0
    ragged = direct_io.aligned_empty((700_001,), ml_dtypes.bfloat16)
    ragged[:] = rng.standard_normal(ragged.size)
    groups = {"model": [aligned, unaligned, ragged, np.arange(5, dtype=np.int64)],
              "optimizer": [], "variables": []}
    paths = {g: [f"{g}/{i}" for i in range(len(a))] for g, a in groups.items()}
    return FILE_FORMAT.Contents(step=9, extra={}, groups=groups, paths=paths, world_size=1,
                                rank_states=[{"residual": rng.standard_normal(64)}])


def _bitwise_same(saved, read):
    import numpy as np
    return all(x.dtype == y.dtype and x.shape == y.shape
               and np.array_equal(x.view(np.uint8), y.view(np.uint8))
               for x, y in zip(saved.groups["model"], read.groups["model"]))


@pytest.mark.parametrize("o_direct", [True, False], ids=["o_direct", "no_o_direct"])
def test_large_arrays_written_past_the_cache_read_back_bit_for_bit(tmp_path, monkeypatch,
                                                                   o_direct):
    import h5py
    if not o_direct:  # a platform or file system without it: the same file through the cache
        monkeypatch.delattr(FILE_FORMAT.direct_io.os, "O_DIRECT", raising=False)
    saved = _mixed_layout_contents()
    path = str(tmp_path / FILE_FORMAT.file_name(9))
    FILE_FORMAT.write(path, saved)
    assert _bitwise_same(saved, FILE_FORMAT.read(path))
    with h5py.File(path, "r") as handle:  # large datasets start on page boundaries
        for key in ("00000", "00001", "00002"):
            assert handle["model"][key].id.get_offset() % FILE_FORMAT.direct_io.ALIGNMENT == 0
    # A flip inside the directly written bytes is caught like any other.
    data = bytearray(open(path, "rb").read())
    aligned = saved.groups["model"][0]
    where = data.find(aligned.tobytes()[:64])
    assert where >= 0
    data[where + aligned.nbytes // 2] ^= 0x10
    open(path, "wb").write(bytes(data))
    with pytest.raises(FILE_FORMAT.CorruptCheckpoint, match="CRC-32"):
        FILE_FORMAT.read(path)


def _evict(path):
    """Drops ``path``'s pages from the page cache (written back first), so that the next read
    comes from the disk, as after a restart on another host."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def _read_into_cache(path, start=0, length=None):
    """Reads [start, start + length) (the whole file by default) into the page cache, and no
    more: readahead off, which would otherwise bring in the next megabytes too."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_RANDOM)
        os.pread(descriptor, length if length is not None else os.path.getsize(path), start)
    finally:
        os.close(descriptor)


def _o_direct_works(directory):
    """Whether this file system takes O_DIRECT (tmpfs does not)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    probe = os.path.join(directory, "probe")
    open(probe, "wb").close()
    try:
        os.close(os.open(probe, os.O_RDONLY | flag))
        return True
    except OSError:
        return False
    finally:
        os.unlink(probe)


def _spy_reads(monkeypatch):
    """Records (offset, bytes, went past the cache) for every pread of direct_io's reader."""
    import fcntl
    direct_io = FILE_FORMAT.direct_io
    reads = []
    original = direct_io._pread

    def spy(descriptor, raw, offset):
        flags = fcntl.fcntl(descriptor, fcntl.F_GETFL)
        reads.append((offset, raw.size, bool(flags & getattr(os, "O_DIRECT", 0))))
        return original(descriptor, raw, offset)

    monkeypatch.setattr(direct_io, "_pread", spy)
    return reads


def _dataset_range(path, key):
    import h5py
    with h5py.File(path, "r") as handle:
        dataset = handle[key]
        return dataset.id.get_offset(), dataset.nbytes


def _direct_bytes(reads, start, length):
    """How many bytes of [start, start + length) were read past the page cache."""
    return sum(size for offset, size, direct in reads
               if direct and start <= offset < start + length)


@pytest.mark.parametrize("where", ["disk", "page_cache", "half_cached", "no_o_direct"])
def test_a_checkpoint_reads_back_bit_for_bit_past_the_cache_through_it_and_without_o_direct(
        tmp_path, monkeypatch, where):
    import numpy as np
    saved = _mixed_layout_contents()
    path = str(tmp_path / FILE_FORMAT.file_name(9))
    FILE_FORMAT.write(path, saved)
    direct = _o_direct_works(str(tmp_path)) and where != "no_o_direct"
    if where == "no_o_direct":  # a platform without it: every byte through the cache
        monkeypatch.delattr(FILE_FORMAT.direct_io.os, "O_DIRECT", raising=False)
    aligned = _dataset_range(path, "model/00000")
    ragged = _dataset_range(path, "model/00002")
    _evict(path)
    if where == "page_cache":
        _read_into_cache(path)
    elif where == "half_cached":
        # The first large array's pages only. Said by the kernel's answer rather than
        # made real: HDF5's own reads of metadata would bring in more (readahead).
        def first_array_cached(descriptor, size):
            pages = np.zeros(-(-size // mmap.PAGESIZE), bool)
            pages[aligned[0] // mmap.PAGESIZE:(aligned[0] + aligned[1]) // mmap.PAGESIZE] = True
            return pages
        monkeypatch.setattr(FILE_FORMAT.direct_io, "resident_pages", first_array_cached)
    reads = _spy_reads(monkeypatch)
    contents = FILE_FORMAT.read(path)
    assert _bitwise_same(saved, contents)
    assert np.array_equal(contents.rank_states[0]["residual"], saved.rank_states[0]["residual"])
    # Large arrays come past the cache from the disk, through it where it holds them;
    # a partial last block always through it.
    cached_first = where in ("page_cache", "half_cached")
    assert _direct_bytes(reads, *aligned) == (aligned[1] if direct and not cached_first else 0)
    ragged_direct = ragged[1] - ragged[1] % FILE_FORMAT.direct_io.ALIGNMENT
    assert _direct_bytes(reads, *ragged) == (ragged_direct if direct and where != "page_cache"
                                             else 0)
    if direct and where == "disk":  # read once, not cached: the pages stay out of the cache
        with FILE_FORMAT.direct_io.DataReader(path) as reader:
            assert reader.cached_fraction(*aligned) < 0.5


def test_the_kernel_says_which_pages_are_in_the_page_cache(tmp_path):
    direct_io = FILE_FORMAT.direct_io
    path = str(tmp_path / "data")
    with open(path, "wb") as handle:
        handle.write(os.urandom(64 * mmap.PAGESIZE))
    _evict(path)
    _read_into_cache(path, 16 * mmap.PAGESIZE, 8 * mmap.PAGESIZE)
    descriptor = os.open(path, os.O_RDONLY)
    try:
        pages = direct_io.resident_pages(descriptor, os.path.getsize(path))
    finally:
        os.close(descriptor)
    if pages is None:
        pytest.skip("this kernel does not say (no mincore)")
    assert pages.shape == (64,) and pages[16:24].all()
    if _o_direct_works(str(tmp_path)):  # a real disk: the others were dropped (tmpfs keeps all)
        assert not pages[:16].any() and not pages[24:].any()
    with direct_io.DataReader(path) as reader:
        assert reader.cached_fraction(16 * mmap.PAGESIZE, 8 * mmap.PAGESIZE) == 1.0
        assert reader.cached_fraction(12 * mmap.PAGESIZE, 8 * mmap.PAGESIZE) >= 0.5


def test_read_into_unaligned_buffers_goes_through_the_cache_and_still_verifies(tmp_path):
    import numpy as np
    saved = _mixed_layout_contents()
    path = str(tmp_path / FILE_FORMAT.file_name(9))
    FILE_FORMAT.write(path, saved)
    _evict(path)
    first = saved.groups["model"][0]
    unaligned = np.empty(first.nbytes + 8, np.uint8)[8:].view(first.dtype).reshape(first.shape)
    assert unaligned.ctypes.data % FILE_FORMAT.direct_io.ALIGNMENT != 0
    contents = FILE_FORMAT.read(path, {"model": [unaligned]})
    assert np.shares_memory(contents.groups["model"][0], unaligned)
    assert _bitwise_same(saved, contents)


@pytest.mark.parametrize("where", ["direct_part", "partial_last_block"])
def test_a_flipped_byte_is_caught_when_read_past_the_cache(tmp_path, monkeypatch, where):
    saved = _mixed_layout_contents()
    path = str(tmp_path / FILE_FORMAT.file_name(9))
    FILE_FORMAT.write(path, saved)
    offset, nbytes = _dataset_range(path, "model/00002")  # 1.4 MB, ends in a partial block
    target = offset + (nbytes // 3 if where == "direct_part" else nbytes - 3)
    with open(path, "r+b") as handle:
        handle.seek(target)
        byte = handle.read(1)[0]
        handle.seek(target)
        handle.write(bytes([byte ^ 0x08]))
    _evict(path)
    reads = _spy_reads(monkeypatch)
    with pytest.raises(FILE_FORMAT.CorruptCheckpoint, match="model/00002: its CRC-32"):
        FILE_FORMAT.read(path)
    if _o_direct_works(str(tmp_path)):
        assert _direct_bytes(reads, offset, nbytes) > 0


def test_the_data_reader_reports_a_file_that_ends_early(tmp_path):
    import numpy as np
    direct_io = FILE_FORMAT.direct_io
    path = str(tmp_path / "data")
    payload = np.random.RandomState(SEED).bytes(3 * direct_io.ALIGNMENT + 100)
    with open(path, "wb") as handle:
        handle.write(payload)
    _evict(path)
    with direct_io.DataReader(path) as reader:
        into = direct_io.aligned_empty((2 * direct_io.ALIGNMENT + 50,), np.uint8)
        reader.read(direct_io.ALIGNMENT, into)  # direct, then the tail through the cache
        assert into.tobytes() == payload[direct_io.ALIGNMENT:3 * direct_io.ALIGNMENT + 50]
        with pytest.raises(EOFError, match="ends before offset"):
            reader.read(2 * direct_io.ALIGNMENT, into)


WAIT_THEN_FINISH = """
import os, sys
sys.path[:0] = [{workers!r}]
from checkpoint_writer_child import expected_contents, import_checkpoint_modules
file_format, writer = import_checkpoint_modules()
directory = {directory!r}
pending = writer.BackgroundWriter()
for step in (1, 2, 3):
    pending.start(directory, expected_contents(file_format, step), keep=2)
    pending.wait()
    assert os.path.exists(os.path.join(directory, file_format.file_name(step))), step
pending.finish()
print([s for s, _ in file_format.checkpoint_files(directory)], file_format.temp_files(directory))
"""


def test_wait_returns_once_durable_and_old_files_go_before_the_next_write(tmp_path):
    # In a child: the writer is imported without TensorFlow, as the crash trials do.
    result = subprocess.run(
        [sys.executable, "-c", WAIT_THEN_FINISH.format(workers=str(WORKERS),
                                                       directory=str(tmp_path))],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "[3, 2] []", result.stdout + result.stderr
