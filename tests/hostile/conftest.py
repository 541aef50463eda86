"""Shared by the hostile tests: no case may hang the run.

Every test runs under an alarm of its module's ``ALARM_S`` seconds (10 by default), or of its
``@pytest.mark.alarm(SECONDS)``: a test that starts whole ``judgekit`` processes needs the
longer one, since an interpreter's start on a loaded machine is not the code under test. A case
that blocks (a FIFO opened for reading, a regex that backtracks forever) then fails with ``Hung``
instead of hanging CI.
"""

from __future__ import annotations

import signal

import pytest


class Hung(BaseException):
    """Raised by the alarm. Not an OSError (TimeoutError is one): no handler may mistake it."""


def pytest_configure(config):
    config.addinivalue_line("markers", "alarm(seconds): this test's hang alarm, instead of its module's ALARM_S")


@pytest.fixture(autouse=True)
def no_hang(request):
    marker = request.node.get_closest_marker("alarm")
    seconds = marker.args[0] if marker else getattr(request.module, "ALARM_S", 10)

    def expire(signum, frame):
        raise Hung(f"the case did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
