"""What code this is: the installed version, and a digest of the package's own files."""

import hashlib
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    __version__ = version("judgekit-agents")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"


@lru_cache(maxsize=1)
def code_sha256() -> str | None:
    """sha256 of judgekit's own source files and prompt templates, with the versions of what
    reads and writes its text (Python, pydantic, jiter), or None where the files cannot be read:
    what a memo of the code's own results (a question's fingerprint) holds for. Any change to
    the code, even one that keeps the version, makes a new digest."""
    import platform

    import jiter
    import pydantic

    root = Path(__file__).resolve().parent.parent  # judgekit/, not this module's _util/
    digest = hashlib.sha256(f"python {platform.python_version()} pydantic {pydantic.VERSION} "
                            f"jiter {jiter.__version__}\0".encode())
    try:
        files = sorted(path for path in root.rglob("*")
                       if path.suffix == ".py" or (path.parent.name == "prompts" and path.suffix == ".txt"))
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest() if files else None
