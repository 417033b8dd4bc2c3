"""Registered, checked, reversible patches of third-party code (``model.patches``); importing the
package registers the shipped ones (:mod:`ascendbench.patches.registry`)."""

from ascendbench.patches import attention_backend, flex_attention_dense  # noqa: F401  (registers)
