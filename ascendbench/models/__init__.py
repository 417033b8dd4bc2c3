"""Model loaders (by ``_target_`` from ``conf/model``) and weight-source resolution."""

from ascendbench.models.layer import SafetensorsLayerLoader
from ascendbench.models.loader import DiffusersLoader, LoadedModel, count_params, import_class
from ascendbench.models.pipeline import PipelineLoader
from ascendbench.models.sources import files_digest, resolve_source

__all__ = ["DiffusersLoader", "LoadedModel", "PipelineLoader", "SafetensorsLayerLoader", "count_params",
           "import_class", "files_digest", "resolve_source"]
