"""Model loaders (by ``_target_`` from ``conf/model``), weight sources and memory estimates."""
