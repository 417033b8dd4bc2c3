"""``python -m ascendbench``: the Hydra application (see :mod:`ascendbench.cli`)."""

from ascendbench.cli import main

if __name__ == "__main__":
    main()
