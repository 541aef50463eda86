"""A provider's rate limit for the scripted server: requests per sliding minute, 429 above it."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from judgekit.testing.replies import Reply


class RequestsPerMinute:
    """At most ``per_minute`` requests answered in any sliding minute (by ``clock``, seconds).

    ``ScriptedOpenAIServer(..., rate_limit=RequestsPerMinute(N))`` answers a request that comes
    when ``N`` were answered within the last minute with HTTP 429 and ``Retry-After`` (whole
    seconds until the oldest leaves the window) instead of its script's reply; a 429 does not
    count against the limit. ``arrivals`` lists when every request came, 429s included.
    """

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError("per_minute must be >= 1")
        self.per_minute = per_minute
        self.clock = clock
        self._lock = threading.Lock()
        self._answered: deque[float] = deque()
        self._arrivals: list[float] = []

    @property
    def arrivals(self) -> list[float]:
        """When each request arrived (``clock``), in arrival order."""
        with self._lock:
            return list(self._arrivals)

    def check(self) -> Reply | None:
        """A 429 for a request arriving now, or None: it is answered as scripted (and counts)."""
        with self._lock:
            now = self.clock()
            self._arrivals.append(now)
            while self._answered and self._answered[0] <= now - 60:
                self._answered.popleft()
            if len(self._answered) < self.per_minute:
                self._answered.append(now)
                return None
            return Reply.rate_limit(retry_after_s=max(1, math.ceil(self._answered[0] + 60 - now)))
