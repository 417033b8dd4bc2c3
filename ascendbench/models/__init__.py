"""Model loaders (by ``_target_`` from ``conf/model``) and weight-source resolution."""

from ascendbench.models.loader import DiffusersLoader, LoadedModel, import_class
from ascendbench.models.sources import files_digest, resolve_source

__all__ = ["DiffusersLoader", "LoadedModel", "import_class", "files_digest", "resolve_source"]
