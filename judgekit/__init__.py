"""judgekit: score AI-agent trajectories against pre-registered rubrics on independent axes."""

from judgekit._version import __version__
from judgekit.errors import ConfigError, InputError, JudgekitError

__all__ = ["ConfigError", "InputError", "JudgekitError", "__version__"]
