"""The job: one composed config -> one ``record.json`` (:func:`ascendbench.job.runner.run_job`)."""
