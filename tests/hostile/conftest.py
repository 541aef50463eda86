"""Shared by the hostile tests: no case may hang the run.

Every test runs under an alarm of its module's ``ALARM_S`` seconds (10 by default). A case that
blocks (a FIFO opened for reading, a regex that backtracks forever) then fails with ``Hung``
instead of hanging CI.
"""

from __future__ import annotations

import signal

import pytest


class Hung(BaseException):
    """Raised by the alarm. Not an OSError (TimeoutError is one): no handler may mistake it."""


@pytest.fixture(autouse=True)
def no_hang(request):
    seconds = getattr(request.module, "ALARM_S", 10)

    def expire(signum, frame):
        raise Hung(f"the case did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
