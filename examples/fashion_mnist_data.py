"""Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package (offline), sharded by rank.

    sudo apt-get install dataset-fashion-mnist     # /usr/share/datasets/fashion-mnist/

The package ships the four gzipped IDX files of Zalando's release; they are
parsed here with numpy and gzip alone (nothing is downloaded). 60 000
training and 10 000 test images of 28x28 grey pixels, ten classes.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Tuple, Union

import numpy as np

DEFAULT_DIRECTORY = Path("/usr/share/datasets/fashion-mnist")
FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}

# IDX element type codes (third byte of the magic number) and their big-endian dtypes.
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def parse_idx(data: bytes, source: str = "<bytes>") -> np.ndarray:
    """The array held by the (uncompressed) bytes of one IDX file.

    Layout: two zero bytes, a type code, the number of dimensions d, then d
    big-endian uint32 sizes, then the elements in C order, big-endian.
    Raises ValueError naming ``source`` when the header is not IDX or the
    payload's length does not match the sizes.
    """
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{source}: not an IDX file (the magic number must start with two "
                         f"zero bytes, got {data[:4]!r})")
    code, ndim = data[2], data[3]
    if code not in IDX_DTYPES:
        raise ValueError(f"{source}: unknown IDX element type 0x{code:02x}; expected one of "
                         + ", ".join(f"0x{c:02x}" for c in IDX_DTYPES))
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{source}: truncated IDX header ({len(data)} bytes for {ndim} "
                         f"dimensions)")
    shape = tuple(int(s) for s in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[code])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{source}: IDX payload is {len(data) - header} bytes, but shape "
                         f"{shape} of {dtype.name} needs {expected}")
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def read_idx(path: Union[str, os.PathLike]) -> np.ndarray:
    """The array in one IDX file, gzipped (``.gz``) or not."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return parse_idx(f.read(), str(path))


def available(directory: Union[str, os.PathLike] = DEFAULT_DIRECTORY) -> bool:
    """Whether all four files are present (i.e. the Debian package is installed)."""
    return all((Path(directory) / name).is_file() for name in FILES.values())


def load(directory: Union[str, os.PathLike] = DEFAULT_DIRECTORY
         ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): images as float32 N x 28 x 28 x 1 in [0, 1],
    labels as int64. Raises FileNotFoundError naming the package when files are missing."""
    directory = Path(directory)
    missing = [name for name in FILES.values() if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST files missing in {directory}: {', '.join(missing)} "
            "(install Debian's dataset-fashion-mnist package)")
    arrays = {key: read_idx(directory / name) for key, name in FILES.items()}
    for part in ("train", "test"):
        images, labels = arrays[f"{part}_images"], arrays[f"{part}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"Fashion-MNIST {part} set: images {images.shape} and labels "
                             f"{labels.shape} do not match")

    def images(a: np.ndarray) -> np.ndarray:
        return (a.astype("float32") / 255.0)[..., None]

    return (images(arrays["train_images"]), arrays["train_labels"].astype("int64"),
            images(arrays["test_images"]), arrays["test_labels"].astype("int64"))


def load_shards(rank: int, size: int,
                directory: Union[str, os.PathLike] = DEFAULT_DIRECTORY
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train) for this rank's shard (every size-th image from rank), and the
    whole test set as validation set, as in digits_data.load_shards."""
    x_train, y_train, x_test, y_test = load(directory)
    return x_train[rank::size], y_train[rank::size], x_test, y_test
