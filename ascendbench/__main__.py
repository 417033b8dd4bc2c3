"""``python -m ascendbench`` and the ``ascendbench`` script (see :mod:`ascendbench.cli`)."""

from ascendbench.compat import exit_if_unsupported


def main() -> None:
    """Check the supported floor of torch and diffusers (one paragraph and exit 2 below it) before
    the application's imports, which an older torch may not survive; then run the CLI."""
    exit_if_unsupported()
    from ascendbench.cli import main as run  # deferred: after the version check, see above

    run()


if __name__ == "__main__":
    main()
