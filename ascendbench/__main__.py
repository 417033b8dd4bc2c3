"""``python -m ascendbench`` and the ``ascendbench`` script: the Hydra application (see :mod:`ascendbench.cli`).

torch and diffusers are checked against the supported floor (:mod:`ascendbench.compat`) before the
application's imports, which a torch older than the floor may not survive.
"""

from ascendbench.compat import exit_if_unsupported


def main() -> None:
    """Check the supported floor (one paragraph and exit 2 below it), then run :func:`ascendbench.cli.main`."""
    exit_if_unsupported()
    from ascendbench.cli import main as run

    run()


if __name__ == "__main__":
    main()
