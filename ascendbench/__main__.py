"""``python -m ascendbench``: the Hydra application (see :mod:`ascendbench.cli`).

torch and diffusers are checked against the supported floor (:mod:`ascendbench.compat`) before the
application's imports, which a torch older than the floor may not survive.
"""

from ascendbench.compat import exit_if_unsupported

if __name__ == "__main__":
    exit_if_unsupported()
    from ascendbench.cli import main

    main()
