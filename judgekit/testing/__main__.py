"""``python -m judgekit.testing``: the scripted server as a process of its own."""

from judgekit.testing.main import main

raise SystemExit(main())
