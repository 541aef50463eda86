"""The nightly safety scan: stop-ship signals from trajectories and end-state diffs.

A separate evaluation from the three axes (a good score does not mean the agent is safe), with
its own records: ``policy`` (what the suite says each tool is and may do), ``signals`` (the
deterministic detectors), ``secrets`` (detect-secrets and the catalogue of key shapes, behind
every mask judgekit writes), ``risks`` (residual-risk records that waive a finding), ``scan``
(one decision per signal).
"""
