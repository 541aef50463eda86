"""The nightly safety scan: stop-ship signals from trajectories and end-state diffs.

A separate evaluation from the three axes (a good score does not mean the agent is safe), with
its own records: ``signals`` (the deterministic detectors, under the suite's
``judgekit.suite.safety_policy``; each signal family in a private module beneath it, such as
``_unexpected_write`` or ``_secret_exposed``), ``normal``, ``confirm`` and ``sql`` (what they
read with), ``risks`` (residual-risk records that waive a finding), ``scan`` (one decision per
signal). Secrets are found and masked by ``judgekit._util.secrets``, below everything that writes.
"""
