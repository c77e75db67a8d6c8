"""Durable writes of checkpoint files: temporary name, fsync, atomic rename, fsync of the directory.

Only one process of a job (rank 0) writes, and one job writes a directory.
A write goes to a temporary name that carries the host and pid, so two
writers never share a temporary file even on a shared file system; a
reader only ever sees complete files, because ``os.replace`` of a fsync'd
file is atomic on POSIX file systems (and on NFS, where the rename is one
server operation).

Like tfdist.runtime's handle, the one pending write of this process is
module state: ``tfdist.checkpoint.wait()`` takes no arguments.
"""
from __future__ import annotations

import os
import socket
import threading
import warnings
from typing import Optional

from tfdist.checkpoint import file_format


# What a damaged checkpoint is renamed to once a restore has fallen back past it.
DAMAGED_SUFFIX = ".damaged"


class WriteFailed(Exception):
    """A background write failed; the message names the file and the cause."""


def _fsync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_durably(directory: str, contents: file_format.Contents, keep: int) -> str:
    """Writes ``contents`` as the checkpoint of its step, durably; then prunes to ``keep`` files."""
    final = write_file(directory, contents)
    prune(directory, keep, final)
    return final


def write_file(directory: str, contents: file_format.Contents) -> str:
    """Writes ``contents`` as the checkpoint of its step, durably (no pruning); returns its path."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, file_format.file_name(contents.step))
    temp = os.path.join(directory, file_format.temp_name(contents.step, socket.gethostname(),
                                                         os.getpid()))
    try:
        file_format.write(temp, contents)
        descriptor = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temp, final)
        _fsync_directory(directory)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    return final


def prune(directory: str, keep: int, written: str) -> None:
    """Deletes older checkpoints than ``written`` (the file just made durable) beyond the
    newest ``keep`` (``written`` included), and temporary files of dead writes.

    ``written`` itself is never deleted, nor is any file of a later step:
    such a file was not written after it by this job's saves (a restore
    that fell back past a damaged file renames that file aside, see
    loader.py), so it is a damaged file no restore has seen yet or one left
    by another run. Ranking by step alone deleted each new save of a lower
    step right after it became durable, leaving nothing that restores. A
    warning names the later files, since a restore tries them first.

    Called only after a new checkpoint is durable, by the one writer of the
    directory while none of its own writes is in flight, so every temporary
    file left is garbage from a writer that died.
    """
    files = file_format.checkpoint_files(directory)
    written_step = int(file_format.FILE_NAME.match(os.path.basename(written)).group(1))
    later = [path for step, path in files if step > written_step]
    earlier = [path for step, path in files if step < written_step]
    for path in earlier[keep - 1:]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    for path in file_format.temp_files(directory):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if later:
        # The same text while the same files are there: Python shows it once.
        warnings.warn(f"tfdist.checkpoint: {directory} holds checkpoints of later steps than "
                      f"the newest save: {', '.join(os.path.basename(p) for p in later)}. "
                      "Pruning keeps them; a restore tries them first (those that do not "
                      "verify it renames aside as *.damaged once an older file restores). "
                      "Move them away if they belong to another run.", stacklevel=2)


def set_aside(path: str) -> str:
    """Renames the damaged checkpoint ``path`` to ``<path>.damaged`` (kept for inspection,
    never listed, restored or pruned again); returns the new path."""
    target = path + DAMAGED_SUFFIX
    os.replace(path, target)
    _fsync_directory(os.path.dirname(path) or ".")
    return target


class BackgroundWriter:
    """At most one write in flight; a new one first waits for the previous.

    ``wait()`` returns once the new file is durable; the pruning of old files
    that follows (unlinking a large file frees its page cache, which took
    0.1 s for 600 MB here) goes on in the background, and the next ``start``
    waits for it.
    """

    def __init__(self) -> None:
        self._thread: Optional[threading.Thread] = None
        self._durable = threading.Event()
        self._error: Optional[BaseException] = None
        self._description = ""
        self.last_path: Optional[str] = None

    def start(self, directory: str, contents: file_format.Contents, keep: int) -> None:
        self.finish()
        self._description = f"step {contents.step} into {directory}"
        durable = self._durable = threading.Event()

        def run() -> None:
            try:
                written = self.last_path = write_file(directory, contents)
            except BaseException as error:  # noqa: BLE001  (reported by wait())
                self._error = error
                return
            finally:
                durable.set()
            try:
                prune(directory, keep, written)
            except BaseException as error:  # noqa: BLE001  (reported by the next wait())
                self._error = error

        # Not a daemon: the interpreter waits for it at exit, so a script that
        # ends right after save() still leaves a complete checkpoint.
        self._thread = threading.Thread(target=run, name="tfdist-checkpoint-writer")
        self._thread.start()

    def wait(self) -> None:
        """Blocks until the pending write is durable; raises WriteFailed if it failed."""
        if self._thread is not None:
            self._durable.wait()
        error, self._error = self._error, None
        if error is not None:
            raise WriteFailed(f"the background save of {self._description} failed: "
                              f"{type(error).__name__}: {error}") from error

    def finish(self) -> None:
        """Waits for the pending write and the pruning after it; raises as wait() does."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self.wait()

    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


PENDING = BackgroundWriter()
