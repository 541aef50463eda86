"""The verdict cache: the store protocol and its keys (``base``), the disk store (``store``), the
writer thread (``writer``), its files on disk (``files``).

``judgekit.cache`` keeps the names it always had; the modules say which part holds what."""

from judgekit.cache.base import CACHE_FORMAT_VERSION, BaseVerdictStore, VerdictStore, cache_key
from judgekit.cache.store import (
    DEFAULT_CACHE_DIR,
    FINGERPRINT_PREFIX,
    MAX_ENTRY_BYTES,
    VerdictCache,
    cache_stats,
)
from judgekit.cache.writer import CacheWriter

__all__ = [
    "BaseVerdictStore",
    "CACHE_FORMAT_VERSION",
    "CacheWriter",
    "DEFAULT_CACHE_DIR",
    "FINGERPRINT_PREFIX",
    "MAX_ENTRY_BYTES",
    "VerdictCache",
    "VerdictStore",
    "cache_key",
    "cache_stats",
]
