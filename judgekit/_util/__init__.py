"""Plumbing every step of the flow uses and none of it owns: reading (``io``, ``documents``),
writing (``files``), text as judgekit shows it and secret masking (``text``, ``secrets``,
``secret_shapes``), the clock (``clock``) and what code this is (``version``). It imports
nothing of judgekit but ``judgekit.errors``."""
