"""The verdict cache: the store protocol and its keys (``store``), its files on disk (``files``).

``judgekit.cache`` keeps the names it always had; the modules say which part holds what."""

from judgekit.cache.store import (
    CACHE_FORMAT_VERSION,
    CacheWriter,
    DEFAULT_CACHE_DIR,
    FINGERPRINT_PREFIX,
    MAX_ENTRY_BYTES,
    VerdictCache,
    VerdictStore,
    cache_key,
    cache_stats,
)

__all__ = [
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
