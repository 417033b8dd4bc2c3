"""Registered, checked, reversible patches; importing the package registers the shipped ones."""

from ascendbench.patches import attention_backend, flex_attention_dense  # noqa: F401  (registers)
