"""ascendbench's Hydra configuration, shipped as the package ``ascendbench.conf`` (``pkg://ascendbench.conf``).

Hydra imports this package to read the tree, so importing it registers the typed schemas the tree
uses (:func:`ascendbench.config.schemas.register`) before anything is composed.
"""

from ascendbench.config.schemas import register

register()
