"""``python -m ascendbench.verify``: print the host report (:mod:`ascendbench.verify.checks`)."""

import sys

from ascendbench.verify.checks import main

if __name__ == "__main__":
    sys.exit(main())
