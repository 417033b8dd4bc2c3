"""``python -m ascendbench`` and the ``ascendbench`` script (see :mod:`ascendbench.cli`)."""

from ascendbench.compat import exit_if_unsupported


def main() -> None:
    """Check the torch and diffusers floors (exit 2 below them), then run the CLI."""
    exit_if_unsupported()
    from ascendbench.cli import main as run  # deferred: after the version check, see above

    run()


if __name__ == "__main__":
    main()
