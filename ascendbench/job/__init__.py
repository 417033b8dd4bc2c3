"""The job: one composed config -> one ``record.json``, a :class:`~ascendbench.job.job.Job`
passed through the stages; :func:`ascendbench.job.runner.run_job` runs it."""
