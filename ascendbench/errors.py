"""The typed errors of ascendbench.

Every error a user can act on derives from :class:`AscendBenchError`. Its message is one paragraph:
what was wrong (the config key, the file, the value), what is allowed, and what to run or set.
The job runner prints that paragraph, writes it into the ``failed`` record and keeps the traceback
for the job log only.
"""


class AscendBenchError(Exception):
    """Base class of the errors whose message is written for the user.

    Attributes:
        reason: short machine-readable cause written into the record (e.g. ``device_unavailable``).
    """

    reason = "error"


class ConfigError(AscendBenchError):
    """A configuration value is missing, of the wrong kind or outside what is allowed."""

    reason = "config"


class NoFreeCardError(ConfigError):
    """The card pool (``hydra/launcher=joblib_cards``) had no free card for this worker: the job fails rather
    than share a card another worker is timing on."""

    reason = "no_free_card"


class DeviceUnavailableError(AscendBenchError):
    """The requested device (or its runtime package) is not usable on this host.

    Attributes:
        short: a one-line cause, used where several devices are probed (``device=auto``).
    """

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


class TaskError(AscendBenchError):
    """The task cannot build its inputs or run the model with the given preset."""

    reason = "task"


class MetricError(AscendBenchError):
    """Reference and device outputs cannot be compared (names or shapes differ)."""

    reason = "metric"


class PatchError(AscendBenchError):
    """A patch named in ``model.patches`` is unknown, badly configured, or cannot apply here.

    The message names the patch, the check that failed and how to fix it (e.g. the package to install).
    """

    reason = "patch"


class ReportError(AscendBenchError):
    """The report, its README back-fill or the ``--compare`` gate got a path or option it cannot use."""

    reason = "report"


class InsufficientMemoryError(AscendBenchError):
    """A model would not fit in the memory available; refused before anything was allocated."""

    reason = "insufficient_memory"


class UnsafeWeightsError(WeightsLoadError):
    """A pickle checkpoint (``.bin``/``.pt``/``.ckpt``...) was found and ``model.allow_pickle`` is not set.

    Unpickling runs code stored in the file; safetensors is the default and pickle needs an explicit opt-in.
    """

    reason = "pickle_refused"


class DeviceOutOfMemoryError(AscendBenchError):
    """The device (or host) ran out of memory during the job; the message gives the sizes to reduce."""

    reason = "oom"


class MissingPackageError(AscendBenchError):
    """A package the chosen model needs (and ascendbench does not depend on) is not installed.

    The message says how to install it (e.g. ``videoflextok`` from its git repository with ``--no-deps``).
    """

    reason = "missing_package"


class BaselineError(AscendBenchError):
    """The CPU reference could not be computed or read (child process failed, cache lock timed out,
    weights or inputs differ between the job and the reference process).

    The message names the log of the reference process or the cache file, and what to do.
    """

    reason = "baseline"


class DryRunError(AscendBenchError):
    """``dry_run=true`` found problems that would make the real job fail; all of them are listed."""

    reason = "dry_run"


class JobDirError(AscendBenchError):
    """The job directory cannot be used: not creatable or writable, a file, out of space, a name too long, or a
    ``record.json`` there that is not a file. Nothing of the job is written; the message says which path and
    how to choose another (``hydra.run.dir`` / ``hydra.sweep.dir``)."""

    reason = "job_dir"


class JobDirBusyError(AscendBenchError):
    """Another process holds the job directory (its lock file): this job refuses to run there rather than
    overwrite that job's record. The message names the holder (pid, host, since when)."""

    reason = "busy"


class OutputWriteError(AscendBenchError, OSError):
    """A file of the job (record, tensors, images) could not be written: the disk is full, read-only, or the
    path is unusable. The message names the file; it is also an :class:`OSError` for callers that catch those."""

    reason = "write"


class ReferenceSourceError(BaselineError):
    """``baseline.source`` names nothing that can serve as a reference: a path that does not exist, a directory
    without ``record.json``, a record of a failed or dry run, or a tensors file that cannot be read. The message
    names the path and what is accepted (a job directory, its ``record.json``, or a tensors file)."""

    reason = "reference_source"


class ReferenceMismatchError(BaselineError):
    """``baseline.source`` is a saved run of another workload (inputs, weights, task, preset sizes, seed, model),
    or its outputs do not match this job's by name and shape. The message names each differing field with both
    values, and the key that accepts a known difference deliberately (``baseline.source_allow``)."""

    reason = "reference_mismatch"


class UnsupportedVersionError(AscendBenchError):
    """torch or diffusers is missing or older than the oldest version ascendbench supports (``ascendbench.compat``).

    The message names the version found, the floor, and how to install a supported one on this host."""

    reason = "unsupported_version"


class TrackingError(AscendBenchError):
    """Experiment tracking cannot start: MLflow is not installed (``pip install 'ascendbench[tracking]'``), or its
    tracking URI is unusable (an unknown scheme, a database that cannot be opened, a store MLflow refuses). The
    message names the URI and what to pass instead."""

    reason = "tracking"


class RankFailedError(AscendBenchError):
    """A rank of a multi-card job (``device.world_size`` > 1) failed or was killed; the other ranks were stopped.
    The message names the rank, how it ended and where its log is."""

    reason = "rank_failed"
