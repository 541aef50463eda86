"""Before a command writes its --out: what the output may never replace."""

from __future__ import annotations

from pathlib import Path


def suite_inputs(loaded) -> list[Path]:
    """The files a suite is made of: an --out must never overwrite one of them."""
    return loaded.input_files()


def prepare_out(out: Path, inputs: list[Path], *, what: str, is_ours) -> None:
    """Before any work: refuse an --out that would overwrite an input, or an existing file that
    is not a previous ``what`` (``is_ours(path)`` tells; a snapshot, a rubric, a device is not),
    or a place that cannot be written (exit 2)."""
    from judgekit._util.files import ensure_writable
    from judgekit.errors import InputError

    target = out.resolve()
    for path in inputs:
        if path.resolve() == target:
            raise InputError(f"--out would overwrite {path}, an input of this suite: choose another file", out)
    if out.exists() and not is_ours(out):
        raise InputError(f"--out names an existing file that is not {what}: refusing to overwrite it "
                         "(remove it or choose another file)", out)
    ensure_writable(out)


def json_file_is(test):
    """``is_ours`` for a JSON output: its parsed content passes ``test`` (unreadable: not ours)."""
    from judgekit._util.io import MAX_FILE_BYTES, read_json
    from judgekit.errors import InputError

    def is_ours(path: Path) -> bool:
        try:
            return bool(test(read_json(path, max_bytes=MAX_FILE_BYTES)))
        except InputError:  # not JSON, or not a regular file
            return False

    return is_ours
