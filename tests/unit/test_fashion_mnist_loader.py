"""examples/fashion_mnist_data.py parses IDX files exactly (checked on small files written
here, so it runs without Debian's dataset-fashion-mnist package) and rejects bad ones."""
import gzip
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import fashion_mnist_data as fm  # noqa: E402


def idx_bytes(array: np.ndarray, code: int) -> bytes:
    """An IDX file written independently of the parser: struct header, big-endian payload."""
    header = struct.pack(">BBBB", 0, 0, code, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    big_endian = array.astype(array.dtype.newbyteorder(">"))
    return header + big_endian.tobytes()


def write_fake_dataset(directory, rng):
    train_images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    train_labels = rng.integers(0, 10, size=7, dtype=np.uint8)
    test_images = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    test_labels = rng.integers(0, 10, size=3, dtype=np.uint8)
    for name, array, code in (("train-images-idx3-ubyte.gz", train_images, 0x08),
                              ("train-labels-idx1-ubyte.gz", train_labels, 0x08),
                              ("t10k-images-idx3-ubyte.gz", test_images, 0x08),
                              ("t10k-labels-idx1-ubyte.gz", test_labels, 0x08)):
        (directory / name).write_bytes(gzip.compress(idx_bytes(array, code)))
    return train_images, train_labels, test_images, test_labels


def test_load_reads_the_four_gzipped_files_exactly(tmp_path):
    train_images, train_labels, test_images, test_labels = write_fake_dataset(
        tmp_path, np.random.default_rng(0))
    assert fm.available(tmp_path)
    x_train, y_train, x_test, y_test = fm.load(tmp_path)
    assert x_train.shape == (7, 28, 28, 1) and x_train.dtype == np.float32
    np.testing.assert_array_equal(x_train[..., 0], train_images.astype(np.float32) / 255)
    np.testing.assert_array_equal(y_train, train_labels.astype(np.int64))
    np.testing.assert_array_equal(x_test[..., 0], test_images.astype(np.float32) / 255)
    np.testing.assert_array_equal(y_test, test_labels.astype(np.int64))
    assert x_train.min() >= 0 and x_train.max() <= 1


def test_shards_are_disjoint_and_cover_the_training_set(tmp_path):
    train_images, train_labels, _, test_labels = write_fake_dataset(
        tmp_path, np.random.default_rng(1))
    shards = [fm.load_shards(rank, 3, tmp_path) for rank in range(3)]
    assert sum(len(s[0]) for s in shards) == 7
    for rank, (x, y, _, y_val) in enumerate(shards):
        np.testing.assert_array_equal(y, train_labels[rank::3])
        np.testing.assert_array_equal(x[..., 0] * 255, train_images[rank::3])
        np.testing.assert_array_equal(y_val, test_labels)


@pytest.mark.parametrize("dtype,code", [(">i2", 0x0B), (">i4", 0x0C), (">f4", 0x0D),
                                        (">f8", 0x0E), ("i1", 0x09)])
def test_parse_idx_every_element_type(dtype, code):
    array = (np.arange(24).reshape(2, 3, 4) - 11).astype(dtype)
    parsed = fm.parse_idx(idx_bytes(array, code))
    assert parsed.shape == (2, 3, 4)
    assert parsed.dtype.isnative
    np.testing.assert_array_equal(parsed, array)


def test_read_idx_uncompressed_file(tmp_path):
    array = np.arange(12, dtype=np.uint8).reshape(3, 4)
    path = tmp_path / "small-idx2-ubyte"
    path.write_bytes(idx_bytes(array, 0x08))
    np.testing.assert_array_equal(fm.read_idx(path), array)


def test_bad_files_are_refused_with_the_reason():
    good = idx_bytes(np.zeros((2, 2), np.uint8), 0x08)
    with pytest.raises(ValueError, match="not an IDX file"):
        fm.parse_idx(b"\x1f\x8b" + good[2:], "x.gz")
    with pytest.raises(ValueError, match="unknown IDX element type 0x07"):
        fm.parse_idx(good[:2] + b"\x07" + good[3:])
    with pytest.raises(ValueError, match="payload is 3 bytes"):
        fm.parse_idx(good[:-1])
    with pytest.raises(ValueError, match="truncated IDX header"):
        fm.parse_idx(good[:6])


def test_missing_files_name_the_package(tmp_path):
    assert not fm.available(tmp_path)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        fm.load(tmp_path)
