"""``python -m ascendbench.verify``: the host report (:mod:`ascendbench.verify.checks`)."""
