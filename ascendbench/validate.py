"""``python -m ascendbench.validate`` (``make validate``): the entry point only; the checks live in
:mod:`ascendbench.config.validate`, which :func:`main` runs."""

import sys

from ascendbench.config.validate import main

if __name__ == "__main__":
    sys.exit(main())
