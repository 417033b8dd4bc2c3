"""``python -m ascendbench.validate`` (``make validate``): :mod:`ascendbench.config.validate`."""

import sys

from ascendbench.config.validate import main

if __name__ == "__main__":
    sys.exit(main())
