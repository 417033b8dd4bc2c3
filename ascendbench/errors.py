"""The typed errors of ascendbench, each an :class:`AscendBenchError` with a ``reason``."""


class AscendBenchError(Exception):
    """Base class of the errors whose message is written for the user."""

    reason = "error"


class ConfigError(AscendBenchError):
    """A configuration value is missing, of the wrong kind or outside what is allowed."""

    reason = "config"


class NoFreeCardError(ConfigError):
    """The card pool had no free card for this worker: the job fails rather than share one."""

    reason = "no_free_card"


class DeviceUnavailableError(AscendBenchError):
    """The requested device (or its runtime package) is not usable; ``short``: a one-line cause."""

    reason = "device_unavailable"
    short = "unavailable"


class WeightsNotFoundError(AscendBenchError):
    """``model.weights=required`` and no weights were found at ``model.source``."""

    reason = "weights_not_found"


class WeightsDigestError(AscendBenchError):
    """``model.expect_digest`` is set and the weights loaded (or their absence) do not match it."""

    reason = "weights_digest_mismatch"


class WeightsLoadError(AscendBenchError):
    """Weights were found but could not be read or do not fit the configured architecture."""

    reason = "weights_invalid"


class UnsafeWeightsError(WeightsLoadError):
    """A pickle checkpoint was found and ``model.allow_pickle`` is off (unpickling runs code)."""

    reason = "pickle_refused"


class TaskError(AscendBenchError):
    """The task cannot build its inputs or run the model with the given preset."""

    reason = "task"


class MetricError(AscendBenchError):
    """Reference and device outputs cannot be compared (names or shapes differ)."""

    reason = "metric"


class PatchError(AscendBenchError):
    """A patch of ``model.patches`` is unknown, badly configured, or cannot apply here."""

    reason = "patch"


class ReportError(AscendBenchError):
    """The report, its README back-fill or the ``--compare`` gate got an unusable path or option."""

    reason = "report"


class InsufficientMemoryError(AscendBenchError):
    """A model would not fit in the memory available; refused before anything was allocated."""

    reason = "insufficient_memory"


class DeviceOutOfMemoryError(AscendBenchError):
    """The device (or host) ran out of memory during the job; the message gives sizes to reduce."""

    reason = "oom"


class MissingPackageError(AscendBenchError):
    """A package the chosen model needs (and ascendbench does not depend on) is not installed."""

    reason = "missing_package"


class BaselineError(AscendBenchError):
    """The CPU reference could not be computed or read (child failed, cache lock timed out...)."""

    reason = "baseline"


class ReferenceSourceError(BaselineError):
    """``baseline.source`` names nothing that can serve as a reference."""

    reason = "reference_source"


class ReferenceMismatchError(BaselineError):
    """``baseline.source`` is a saved run of another workload, or its outputs do not match."""

    reason = "reference_mismatch"


class DryRunError(AscendBenchError):
    """``dry_run=true`` found problems that would make the real job fail; all of them are listed."""

    reason = "dry_run"


class WouldBuild(AscendBenchError):
    """A dry run met a ``_target_`` that is not ascendbench's own: named in the plan, not built."""


class JobDirError(AscendBenchError):
    """The job directory cannot be used (not writable, a file, full...); nothing was written."""

    reason = "job_dir"


class JobDirBusyError(AscendBenchError):
    """Another process holds the job directory (its lock file): this job refuses to run there."""

    reason = "busy"


class OutputWriteError(AscendBenchError, OSError):
    """A file of the job could not be written (disk full, read-only, unusable path)."""

    reason = "write"


class UnsupportedVersionError(AscendBenchError):
    """torch or diffusers is missing or older than the oldest version ascendbench supports."""

    reason = "unsupported_version"


class TrackingError(AscendBenchError):
    """Experiment tracking cannot start: MLflow is missing, or its tracking URI is unusable."""

    reason = "tracking"


class RankFailedError(AscendBenchError):
    """A rank of a multi-card job failed or was killed; the other ranks were stopped."""

    reason = "rank_failed"
