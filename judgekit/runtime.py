"""Process set-up for a judging process: what the CLI calls once at start (``init``).

Library callers decide for themselves: ``init`` changes process-wide settings (an environment
variable, the garbage collector's thresholds), which a host application may not want.
"""

from __future__ import annotations

import gc
import os

GEN0_THRESHOLD = 20_000
"""Allocations between young-generation collections in a tuned process (Python's default: 700).
A run allocates many short-lived objects per trajectory (models, parsed JSON); at the default,
collections ran ~140 times per thousand cached verdicts, about a fifth of the time of an
all-cached rerun, and found almost nothing to free."""

_TUNED = False


def init(*, tune_gc: bool = False) -> None:
    """Set up this process for judging.

    Always: litellm is told to use the price map it ships instead of fetching one over the
    network when it is imported. ``tune_gc``: what is alive now (judgekit's modules, and later
    litellm's ~400k long-lived objects, see ``after_heavy_import``) is moved out of the
    collector's way (``gc.freeze``) and young collections run every ``GEN0_THRESHOLD``
    allocations; memory stays bounded (cycles are still collected), collections get rarer and
    cheaper.
    """
    global _TUNED
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if tune_gc:
        _TUNED = True
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
        gc.collect()
        gc.freeze()


def after_heavy_import() -> None:
    """Called once a heavy library (litellm) is imported: in a tuned process, freeze what its
    import left alive, so full collections do not walk it again and again."""
    if _TUNED:
        gc.collect()
        gc.freeze()
