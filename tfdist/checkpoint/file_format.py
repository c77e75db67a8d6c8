"""The checkpoint file: one HDF5 file, written and verified with h5py alone.

Layout (readable with plain h5py, see docs/fault_tolerance.md)::

    /                       attrs: format, format_version, manifest (JSON), digest
    /model/00000 ...        one dataset per model variable, in model.variables order
                        (restore matches them by path, see matching.py)
    /optimizer/00000 ...    the optimizer's variables (iterations, moments, ...)
    /variables/00000 ...    the ``variables=`` of save()
    /rank_state/00001/00000 rank 1's own arrays (named in the manifest)

The manifest holds the step, ``extra``, for every dataset its variable
path, shape, dtype and the CRC-32 of its bytes, and (optional, since it
was added without a new format version) ``model_build``: the model's input
shape, from which restore builds a model that is not built yet. Checks: a CRC-32 per
dataset, verified after every read, and a SHA-256 digest of the manifest,
which covers the CRC-32s and everything else. A dataset whose size or dtype
differs from the manifest fails verification too. Nothing is pickled; a
file holds only numbers and JSON text.

Why not HDF5's fletcher32 filter (format version 1, still read): it needs
chunked datasets and runs at a few hundred MB/s, which made a write about
twice and a read about ten times slower than the same file without it.
CRC-32 (ISA-L's, about 30 GB/s here, or zlib's at 3-4 GB/s when isal is
not installed: the same checksum) releases the GIL, and detects every burst error
up to 32 bits and every odd number of flipped bits, which fletcher32 does not.

This module (and direct_io, which writes the large arrays) imports neither
TensorFlow nor the rest of tfdist, so that the background writer and the
crash tests need only h5py and numpy.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import h5py
import numpy as np

from tfdist.checkpoint import direct_io

try:  # ISA-L's CRC-32: the same checksum as zlib's, about 7x as fast here (PCLMULQDQ)
    from isal.isal_zlib import crc32 as _crc32_update
except ImportError:  # optional (scripts/setup.sh installs it where it can): zlib's
    _crc32_update = zlib.crc32

FORMAT = "tfdist-checkpoint"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
GROUPS = ("model", "optimizer", "variables")
FILE_NAME = re.compile(r"^ckpt-(\d{10})\.h5$")
TEMP_MARK = ".tmp."
# CRCs are computed, and h5py's writes of small datasets made, in slices of
# this many bytes: one call holds the GIL throughout, and the training thread
# needs it between steps.
SLICE_BYTES = 4 << 20


class CorruptCheckpoint(Exception):
    """A file that is not a complete, intact tfdist checkpoint; the message says what failed."""


def file_name(step: int) -> str:
    """The name of the checkpoint of ``step``: sorting names sorts steps."""
    return f"ckpt-{step:010d}.h5"


def temp_name(step: int, host: str, pid: int) -> str:
    """A temporary name no other writer uses, even on another host of a shared file system."""
    return f".{file_name(step)}{TEMP_MARK}{host}.{pid}"


def checkpoint_files(directory: str) -> List[Tuple[int, str]]:
    """(step, path) of the finished checkpoint files in ``directory``, newest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), os.path.join(directory, name))
             for name in names for m in [FILE_NAME.match(name)] if m]
    return sorted(found, reverse=True)


def temp_files(directory: str) -> List[str]:
    """Paths of temporary files left by writers (finished or dead)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [os.path.join(directory, n) for n in names
            if n.startswith(".ckpt-") and TEMP_MARK in n]


def _storable(array: np.ndarray) -> np.ndarray:
    """``array`` as HDF5 can hold it: dtypes HDF5 lacks (bfloat16, float8) as raw unsigned ints."""
    if array.dtype.kind in "biufc" and array.dtype.isbuiltin:
        return array
    return array.view(np.dtype(f"u{array.dtype.itemsize}"))


def array_entry(array: np.ndarray, path: str, crc32: Optional[int] = None) -> Dict[str, Any]:
    """The manifest's description of one array (with the CRC-32 of its bytes, when known)."""
    entry = {"path": path, "shape": list(array.shape), "dtype": array.dtype.name,
             "stored": _storable(array).dtype.name}
    if crc32 is not None:
        entry["crc32"] = crc32
    return entry


def _slices(flat: np.ndarray):
    step = max(1, SLICE_BYTES // max(1, flat.itemsize))
    for start in range(0, flat.size, step):
        yield start, flat[start:start + step]


def _crc32(flat: np.ndarray) -> int:
    """The CRC-32 of ``flat``'s bytes, in one call: it releases the GIL while it runs."""
    return _crc32_update(np.ascontiguousarray(flat).reshape(-1).view(np.uint8)) if flat.size else 0


def _crc32_handing_over(flat: np.ndarray) -> int:
    """The CRC-32 of ``flat``'s bytes, slice by slice, handing the GIL over between slices."""
    crc = 0
    for _, piece in _slices(flat):
        crc = _crc32_update(piece.view(np.uint8), crc)
        # Without the hand-over a training thread that asked for the GIL waited
        # up to 9 ms here (the switch interval is 5 ms); with it, 3 ms, as idle.
        time.sleep(0)
    return crc


# A large dataset's bytes, written after HDF5 has laid out the file: (file offset, bytes).
PendingData = List[Tuple[int, np.ndarray]]


def _direct_layout() -> h5py.h5p.PropDCID:
    """Contiguous, its space allocated at creation, never filled: HDF5 fixes the
    dataset's file offset and writes none of its bytes (direct_io does)."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return dcpl


def _write_dataset(group: h5py.Group, key: str, array: np.ndarray, pending: PendingData) -> int:
    """Stores ``array`` flat under ``key``; returns the CRC-32 of its bytes.

    A large array only gets its place in the file here; its bytes are added to
    ``pending``, for direct_io to write once the file is closed.
    """
    flat = np.ascontiguousarray(_storable(array)).reshape(-1)
    crc = _crc32_handing_over(flat)
    # One-dimensional on disk, so that slices are easy whatever the shape;
    # the manifest keeps the real shape.
    if flat.nbytes >= direct_io.DIRECT_MIN_BYTES:
        dataset = group.create_dataset(key, shape=flat.shape, dtype=flat.dtype,
                                       dcpl=_direct_layout())
        offset = dataset.id.get_offset()
        if offset is not None:
            pending.append((offset, flat))
            return crc
    else:
        dataset = group.create_dataset(key, shape=flat.shape, dtype=flat.dtype)
    for start, piece in _slices(flat):
        dataset[start:start + piece.size] = piece
        time.sleep(0)  # the GIL hand-over, as above
    return crc


def manifest_digest(manifest_json: str) -> str:
    return hashlib.sha256(manifest_json.encode()).hexdigest()


@dataclass
class Contents:
    """What a checkpoint holds: the step, ``extra``, and arrays by group, in order."""

    step: int
    extra: Dict[str, Any]
    groups: Dict[str, List[np.ndarray]]
    paths: Dict[str, List[str]]
    world_size: int
    rank_states: List[Dict[str, np.ndarray]]
    # How to build the saved model before it can take the values (tfdist.checkpoint.model_build);
    # None when the file does not say (no Keras model, or an older file).
    model_build: Optional[Dict[str, Any]] = None


def write(path: str, contents: Contents) -> None:
    """Writes ``contents`` to ``path`` (no fsync, no rename: the writer does those)."""
    manifest: Dict[str, Any] = {
        "step": int(contents.step), "extra": contents.extra,
        "world_size": int(contents.world_size), "groups": {}, "rank_state": []}
    if contents.model_build is not None:
        manifest["model_build"] = contents.model_build
    pending: PendingData = []
    # Large datasets start at page-aligned offsets, as direct writes need.
    with h5py.File(path, "w", alignment_threshold=direct_io.DIRECT_MIN_BYTES,
                   alignment_interval=direct_io.ALIGNMENT) as handle:
        for group_name in GROUPS:
            arrays = contents.groups.get(group_name, [])
            paths = contents.paths.get(group_name, [])
            group = handle.create_group(group_name)
            manifest["groups"][group_name] = [
                array_entry(a, p, _write_dataset(group, f"{index:05d}", a, pending))
                for index, (a, p) in enumerate(zip(arrays, paths))]
        states = handle.create_group("rank_state")
        for rank, state in enumerate(contents.rank_states):
            group = states.create_group(f"{rank:05d}")
            names = sorted(state)
            manifest["rank_state"].append(
                [array_entry(state[n], n,
                             _write_dataset(group, f"{index:05d}", state[n], pending))
                 for index, n in enumerate(names)])
        text = json.dumps(manifest, sort_keys=True)
        handle.attrs["format"] = FORMAT
        handle.attrs["format_version"] = FORMAT_VERSION
        handle.attrs["manifest"] = text
        handle.attrs["digest"] = manifest_digest(text)
    with direct_io.DataWriter(path) as data_writer:
        for offset, flat in pending:
            data_writer.write(offset, flat)


Buffers = Mapping[str, Sequence[np.ndarray]]


def _reusable(buffers: Optional[Buffers], group: str, index: int, size: int,
              stored_dtype: np.dtype) -> Optional[np.ndarray]:
    """``buffers[group][index]`` as a flat array to read into, if it holds ``size`` values of
    ``stored_dtype`` and is contiguous; else None."""
    candidates = (buffers or {}).get(group, ())
    if index >= len(candidates):
        return None
    buffer = candidates[index]
    if not buffer.flags.c_contiguous or not buffer.flags.writeable or buffer.size != size:
        return None
    flat = _storable(buffer).reshape(-1)
    return flat if flat.dtype == stored_dtype else None


def _numpy_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16, float8_*: installed with TensorFlow
        return np.dtype(getattr(ml_dtypes, name))


@contextlib.contextmanager
def _damage_is_corruption(where: str = "") -> Iterator[None]:
    """Raises what h5py (damaged object headers, b-trees, attributes) and a short read
    raise as CorruptCheckpoint, naming ``where``."""
    try:
        yield
    except CorruptCheckpoint:
        raise
    except (OSError, EOFError, ValueError, KeyError, TypeError, RuntimeError) as error:
        raise CorruptCheckpoint(f"{where}{type(error).__name__}: {error}") from None


def _raw_offset(dataset: h5py.Dataset) -> Optional[int]:
    """The file offset of the dataset's bytes if they lie there as they are (contiguous,
    unfiltered, allocated in this file), so that they can be read without HDF5; else None."""
    plist = dataset.id.get_create_plist()
    if (plist.get_layout() != h5py.h5d.CONTIGUOUS or plist.get_nfilters()
            or plist.get_external_count()):
        return None
    offset = dataset.id.get_offset()
    if offset is None or dataset.id.get_storage_size() != dataset.nbytes:
        return None
    return offset


@dataclass(frozen=True)
class _Stored:
    """One dataset as the manifest describes it, checked against the file's metadata."""

    dataset: h5py.Dataset
    entry: Mapping[str, Any]
    where: str
    size: int
    stored_dtype: np.dtype
    offset: Optional[int]  # of its raw bytes; None: read through HDF5


def _checked(dataset: h5py.Dataset, entry: Mapping[str, Any], where: str,
             version: int) -> _Stored:
    """``dataset`` once its dtype, size and checksum fit the manifest's ``entry``."""
    shape = tuple(entry["shape"])
    size = int(np.prod(shape, dtype=np.int64))
    stored_dtype = np.dtype(entry["stored"])
    if dataset.dtype != stored_dtype:
        raise CorruptCheckpoint(f"{where}: dtype {dataset.dtype} on disk, {stored_dtype} expected")
    if dataset.shape != (size,) and (size or version >= 2):  # v1 kept empty shapes
        raise CorruptCheckpoint(f"{where}: {dataset.shape} on disk, {size} values in the manifest")
    if version == 1 and size and not dataset.fletcher32:
        raise CorruptCheckpoint(f"{where}: no fletcher32 filter on a version 1 dataset")
    if version >= 2 and not isinstance(entry.get("crc32"), int):
        raise CorruptCheckpoint(f"{where}: the manifest holds no CRC-32 for it")
    return _Stored(dataset, entry, where, size, stored_dtype,
                   _raw_offset(dataset) if size else None)


# Called with (index in the order of GROUPS, array) as each array has verified.
ArrayDone = Callable[[int, np.ndarray], None]


class CheckpointReader:
    """One checkpoint file, open for reading.

    Opening reads only metadata: it checks the manifest against its digest,
    and every dataset's dtype and size against the manifest; ``step``,
    ``extra``, ``world_size`` and ``entries`` (the manifest's description of
    each array, by group) are then known. ``contents`` reads and verifies
    the data. Raises CorruptCheckpoint for anything that fails.

    Datasets whose bytes lie contiguous in the file are read at their offset
    with direct_io's reader (past the page cache where the file is not in
    it); the others (version 1's fletcher32 chunks) through HDF5.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._handle = _open(path)
        self._data: Optional[direct_io.DataReader] = None
        try:
            with _damage_is_corruption():
                self._index()
                self._data = direct_io.DataReader(path)
        except BaseException:
            self.close()
            raise

    def _index(self) -> None:
        manifest, self._version, _ = _verified_manifest(self._handle)
        self.step = int(manifest["step"])
        self.extra: Dict[str, Any] = manifest["extra"]
        self.world_size = int(manifest["world_size"])
        self.model_build: Optional[Dict[str, Any]] = manifest.get("model_build")
        self.entries: Dict[str, List[Dict[str, Any]]] = {}
        self._groups: Dict[str, List[_Stored]] = {}
        for group_name in GROUPS:
            entries = manifest["groups"].get(group_name, [])
            group = self._handle[group_name]
            if len(group) != len(entries):
                raise CorruptCheckpoint(f"/{group_name} holds {len(group)} datasets, "
                                        f"the manifest {len(entries)}")
            self.entries[group_name] = entries
            self._groups[group_name] = [
                _checked(group[f"{i:05d}"], e, f"/{group_name}/{i:05d}", self._version)
                for i, e in enumerate(entries)]
        self._rank_states: List[List[_Stored]] = [
            [_checked(self._handle[f"rank_state/{rank:05d}/{i:05d}"], e,
                      f"/rank_state/{rank:05d}/{i:05d}", self._version)
             for i, e in enumerate(entries)]
            for rank, entries in enumerate(manifest["rank_state"])]

    def __enter__(self) -> "CheckpointReader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._data is not None:
            self._data.close()
            self._data = None
        self._handle.close()

    def rank_state_arrays(self) -> int:
        """How many per-rank arrays the file holds, over all ranks."""
        return sum(len(state) for state in self._rank_states)

    def contents(self, buffers: Optional[Buffers] = None,
                 each: Optional[ArrayDone] = None) -> Contents:
        """Reads and verifies every array: the groups' in order, then the rank states.

        ``buffers`` (arrays by group, as in Contents.groups) are read into
        where their size and dtype fit, instead of fresh arrays: memory that
        is already mapped takes no page faults, which on this VM made reading
        into fresh memory up to several times slower. Their contents are
        undefined if the read fails. ``each`` is called as each array of
        the groups has verified; nothing read may be used before this
        returns, since a later array may fail.
        """
        groups: Dict[str, List[np.ndarray]] = {}
        count = 0
        for group_name in GROUPS:
            arrays = groups[group_name] = []
            for index, stored in enumerate(self._groups[group_name]):
                array = self._read(stored, _reusable(buffers, group_name, index, stored.size,
                                                     stored.stored_dtype))
                arrays.append(array)
                if each is not None:
                    each(count, array)
                count += 1
        rank_states = [{stored.entry["path"]: self._read(stored) for stored in state}
                       for state in self._rank_states]
        return Contents(step=self.step, extra=self.extra, groups=groups,
                        paths={g: [e["path"] for e in self.entries[g]] for g in GROUPS},
                        world_size=self.world_size, rank_states=rank_states,
                        model_build=self.model_build)

    def _read(self, stored: _Stored, into: Optional[np.ndarray] = None) -> np.ndarray:
        data = into if into is not None else direct_io.aligned_empty((stored.size,),
                                                                      stored.stored_dtype)
        with _damage_is_corruption(f"{stored.where}: "):
            if stored.offset is not None:
                self._data.read(stored.offset, data)
            elif stored.size:
                stored.dataset.read_direct(data)  # HDF5 checks fletcher32 here (version 1)
            if self._version >= 2 and _crc32(data) != stored.entry["crc32"]:
                raise CorruptCheckpoint(f"{stored.where}: its CRC-32 differs from the manifest's")
            data = data.reshape(stored.entry["shape"])
            dtype = _numpy_dtype(stored.entry["dtype"])
        return data if dtype == stored.stored_dtype else data.view(dtype)


def read(path: str, buffers: Optional[Buffers] = None) -> Contents:
    """Reads and verifies the checkpoint at ``path``; raises CorruptCheckpoint if anything fails.

    ``buffers``: as in ``CheckpointReader.contents``.
    """
    with CheckpointReader(path) as reader:
        return reader.contents(buffers)


def _open(path: str) -> h5py.File:
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as error:
        raise CorruptCheckpoint(f"not a readable HDF5 file ({error})") from None


def _verified_manifest(handle: h5py.File) -> Tuple[Dict[str, Any], int, str]:
    """The manifest, the format version and the manifest's digest, once the digest matches."""
    attrs = handle.attrs
    if attrs.get("format") != FORMAT:
        raise CorruptCheckpoint(f"not a {FORMAT} file (format attribute {attrs.get('format')!r})")
    version = int(attrs.get("format_version", -1))
    if version not in READABLE_VERSIONS:
        raise CorruptCheckpoint(f"format version {attrs.get('format_version')!r}, "
                                f"this tfdist reads {READABLE_VERSIONS}")
    text = attrs.get("manifest")
    text = text.decode() if isinstance(text, bytes) else text
    digest = manifest_digest(text) if isinstance(text, str) else None
    if digest is None or digest != attrs.get("digest"):
        raise CorruptCheckpoint("the manifest does not match its SHA-256 digest")
    return json.loads(text), version, digest


def newest_valid(directory: str, buffers: Optional[Buffers] = None
                 ) -> Tuple[Optional[str], Optional[Contents], List[str]]:
    """The newest checkpoint in ``directory`` that verifies, its contents, and what failed.

    The third item lists "path: reason" for every newer file that did not
    verify. (None, None, failures) when nothing verifies; failures is empty
    too when the directory holds no checkpoint at all. ``buffers``: as in
    ``read``.
    """
    failures: List[str] = []
    for _, path in checkpoint_files(directory):
        try:
            return path, read(path, buffers), failures
        except CorruptCheckpoint as error:
            failures.append(f"{path}: {error}")
    return None, None, failures


def serialize_arrays(state: Mapping[str, np.ndarray]) -> bytes:
    """A dict of arrays as bytes (a JSON header, then the raw data), for sending between ranks."""
    if not state:
        return b""
    names = sorted(state)
    arrays = [np.ascontiguousarray(_storable(np.asarray(state[n]))) for n in names]
    header = json.dumps([array_entry(np.asarray(state[n]), n) for n in names]).encode()
    return b"".join([len(header).to_bytes(8, "little"), header] + [a.tobytes() for a in arrays])


def deserialize_arrays(data: bytes) -> Dict[str, np.ndarray]:
    """The inverse of serialize_arrays."""
    if not data:
        return {}
    length = int.from_bytes(data[:8], "little")
    entries = json.loads(data[8:8 + length].decode())
    offset = 8 + length
    result: Dict[str, np.ndarray] = {}
    for entry in entries:
        stored = np.dtype(entry["stored"])
        count = int(np.prod(entry["shape"], dtype=np.int64))
        array = np.frombuffer(data, stored, count, offset).reshape(entry["shape"]).copy()
        offset += count * stored.itemsize
        dtype = _numpy_dtype(entry["dtype"])
        result[entry["path"]] = array if dtype == stored else array.view(dtype)
    return result
