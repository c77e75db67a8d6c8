"""tests/unit/test_checkpoint_files.py: a writer that the test kills with SIGKILL at a random moment.

    checkpoint_writer_child.py DIRECTORY blocking|background [KEEP]
    checkpoint_writer_child.py DIRECTORY damage SEED TRIALS

Saves step 1, 2, 3, ... of made-up state (see ``expected_contents``) with
tfdist's writer, forever, and prints "durable N" once step N is known to be
durable: after a blocking write returned, or (background) after the next
save had to wait for it. It imports only the writer and the file format
(h5py and numpy), not TensorFlow, so that a trial costs a fraction of a
second.

"damage" saves steps 1 and 2, then, in each trial, truncates the newest file
or flips random bytes in it (half of the trials then drop it from the page
cache, so that it is read past the cache), and checks what restore's choice of file
(``newest_valid``) returns: exactly the values saved at step 2, or step 1's
with step 2 reported as damaged. It prints one line per trial and exits
non-zero on anything else. It runs in its own process so that an HDF5 crash
on a damaged file shows as a failure instead of taking pytest down.
"""
import importlib.util
import os
import random
import shutil
import sys
import types
from pathlib import Path

import numpy as np


def import_checkpoint_modules():
    """tfdist.checkpoint.file_format and .writer, without running tfdist/__init__ (TensorFlow)."""
    root = Path(importlib.util.find_spec("tfdist").submodule_search_locations[0])
    for name, path in (("tfdist", root), ("tfdist.checkpoint", root / "checkpoint")):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules[name] = package
    from tfdist.checkpoint import file_format, writer
    return file_format, writer


def expected_contents(file_format, step: int):
    rng = np.random.RandomState(step)
    # The first array page-aligned, as the snapshot's are, so that kills also
    # land in the middle of O_DIRECT writes; the optimizer's through the cache.
    first = file_format.direct_io.aligned_empty((256, 1024), np.float32)
    first[:] = rng.standard_normal((256, 1024))
    groups = {"model": [first,
                        rng.standard_normal(1024).astype(np.float32),
                        np.array(step, np.int64)],
              "optimizer": [rng.standard_normal((256, 1024)).astype(np.float32)],
              "variables": []}
    paths = {g: [f"{g}/{i}" for i in range(len(a))] for g, a in groups.items()}
    states = [{"residual": rng.standard_normal(64).astype(np.float32)} for _ in range(2)]
    return file_format.Contents(step=step, extra={"step": step}, groups=groups, paths=paths,
                                world_size=2, rank_states=states)


def same_contents(a, b) -> bool:
    return (a.step == b.step and a.extra == b.extra and a.paths == b.paths
            and a.world_size == b.world_size
            and all(len(a.groups[g]) == len(b.groups[g]) and
                    all(x.dtype == y.dtype and np.array_equal(x, y)
                        for x, y in zip(a.groups[g], b.groups[g])) for g in a.groups)
            and all(sorted(x) == sorted(y) and all(np.array_equal(x[k], y[k]) for k in x)
                    for x, y in zip(a.rank_states, b.rank_states)))


def damage(directory: str, seed: int, trials: int) -> int:
    file_format, writer = import_checkpoint_modules()
    rng = random.Random(seed)
    for step in (1, 2):
        writer.write_durably(directory, expected_contents(file_format, step), keep=2)
    newest = os.path.join(directory, file_format.file_name(2))
    pristine = newest + ".pristine"
    shutil.copyfile(newest, pristine)
    size = os.path.getsize(pristine)
    wrong = 0
    for trial in range(trials):
        shutil.copyfile(pristine, newest)
        if trial % 2 == 0:
            kind = "truncate"
            with open(newest, "r+b") as handle:
                handle.truncate(rng.randrange(0, size))
        else:
            kind = "flip"
            with open(newest, "r+b") as handle:
                for _ in range(rng.randint(1, 3)):
                    offset = rng.randrange(size)
                    handle.seek(offset)
                    byte = handle.read(1)[0]
                    handle.seek(offset)
                    handle.write(bytes([byte ^ rng.randint(1, 255)]))
        if trial % 4 >= 2:  # half of each kind read from the disk, past the page cache
            descriptor = os.open(newest, os.O_RDONLY)
            os.fsync(descriptor)
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(descriptor)
        path, contents, failures = file_format.newest_valid(directory)
        if path == newest and same_contents(contents, expected_contents(file_format, 2)):
            outcome = "newest, intact values"
        elif (path == os.path.join(directory, file_format.file_name(1)) and
              same_contents(contents, expected_contents(file_format, 1)) and
              len(failures) == 1 and failures[0].startswith(newest)):
            outcome = "fell back to step 1"
        else:
            outcome = f"WRONG: {path} {failures}"
            wrong += 1
        print(f"trial {trial} {kind}: {outcome}", flush=True)
    return 1 if wrong else 0


def main(directory: str, mode: str, keep: int = 2) -> None:
    file_format, writer = import_checkpoint_modules()
    print("ready", flush=True)
    step = 0
    while True:
        step += 1
        contents = expected_contents(file_format, step)
        if mode == "blocking":
            writer.write_durably(directory, contents, keep=keep)
            print(f"durable {step}", flush=True)
        else:
            writer.PENDING.start(directory, contents, keep=keep)  # waits for step - 1
            if step > 1:
                print(f"durable {step - 1}", flush=True)
            np.random.RandomState(step).standard_normal(200_000).sum()  # "training"


if __name__ == "__main__":
    if sys.argv[2] == "damage":
        sys.exit(damage(sys.argv[1], int(sys.argv[3]), int(sys.argv[4])))
    main(sys.argv[1], sys.argv[2], *[int(a) for a in sys.argv[3:4]])
