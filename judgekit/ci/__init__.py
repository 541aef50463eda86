"""After a run, in CI: the history of runs (``history``) and the comparison against a baseline (``compare``)."""
