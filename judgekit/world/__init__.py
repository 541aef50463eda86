"""The world an agent acted on: snapshots (``snapshot``), their files (``snapshot_files``), the
end-state diff (``diff``) and the JSON equality it compares by (``json_equality``)."""

from judgekit.world.snapshot import (
    JsonSnapshot,
    Snapshot,
    SnapshotSpec,
    SqliteSnapshot,
    TableInfo,
    format_pointer,
    load_json_file,
    load_snapshot,
    parse_pointer,
    quote_identifier,
    snapshot_from_path,
    to_json_value,
)
from judgekit.world.diff import (
    Change,
    DIFF_FORMAT_VERSION,
    Diff,
    Op,
    apply_json_diff,
    diff_paths,
    diff_snapshots,
    render_change,
    render_path,
    render_text,
)

__all__ = [
    "Change",
    "DIFF_FORMAT_VERSION",
    "Diff",
    "JsonSnapshot",
    "Op",
    "Snapshot",
    "SnapshotSpec",
    "SqliteSnapshot",
    "TableInfo",
    "apply_json_diff",
    "diff_paths",
    "diff_snapshots",
    "format_pointer",
    "load_json_file",
    "load_snapshot",
    "parse_pointer",
    "quote_identifier",
    "render_change",
    "render_path",
    "render_text",
    "snapshot_from_path",
    "to_json_value",
]
