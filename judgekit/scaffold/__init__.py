"""``judgekit init``: a first suite, from templates, that runs green out of the box."""

from judgekit.scaffold.init import WORLD_KINDS, Scaffold, init_suite, next_steps, planned_files

__all__ = ["WORLD_KINDS", "Scaffold", "init_suite", "next_steps", "planned_files"]
