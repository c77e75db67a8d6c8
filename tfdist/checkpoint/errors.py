"""The error of the checkpoint API (tfdist.checkpoint exports it)."""


class CheckpointError(RuntimeError):
    """A checkpoint could not be saved, or none could be restored; the message says why."""
