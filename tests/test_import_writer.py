"""The importers' one writer: staged, all-or-nothing, never outside --out, locks its rubrics;
and the registry and `judgekit import --help` that list the importers."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from judgekit.rubric import lock as locking
from judgekit._util.files import protect
from judgekit.cli import main
from judgekit.errors import InputError
from judgekit.importers import BUILTIN, accepted_options, describe, importer_names
from judgekit.importers._writer import ImportWriter
from judgekit.rubric.model import Rubric
from judgekit.trajectory import Trajectory


def _rubric() -> Rubric:
    return Rubric.model_validate({
        "id": "r", "version": "1.0.0", "registered": date(2024, 5, 1),
        "tool_correctness": {"guide": "One call.", "expected_calls": [{"tool": "t"}]},
    })


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_new_out_appears_whole_with_its_lock_and_suite(tmp_path):
    out = tmp_path / "out"
    with ImportWriter(out) as writer:
        sink = writer.lines("trajectories/a.jsonl")
        sink.add(Trajectory(id="t1", prompt="p"))
        sink.add({"id": "t2", "prompt": "q"})
        writer.rubric(_rubric())
        writer.suite("s", [{"file": "trajectories/a.jsonl", "rubric": "r@1.0.0"}])
        assert not out.exists()  # nothing shows before the block ends
    assert sorted(_files(out)) == ["rubrics/r.yaml", "rubrics/rubrics.lock", "suite.yaml", "trajectories/a.jsonl"]
    assert (out / "trajectories/a.jsonl").read_text().splitlines() == ['{"id":"t1","prompt":"p"}', '{"id":"t2","prompt":"q"}']
    assert sink.count == 2
    lock = locking.read_lock(out / "rubrics/rubrics.lock")
    assert lock.rubrics["r@1.0.0"].sha256 == _rubric().sha256() and lock.rubrics["r@1.0.0"].file == "r.yaml"
    assert writer.written == [out / "trajectories/a.jsonl", out / "rubrics/r.yaml", out / "suite.yaml",
                              out / "rubrics/rubrics.lock"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left


def test_a_failed_import_leaves_nothing_and_keeps_what_was_there(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "trajectories.jsonl").write_text("old\n")
    with pytest.raises(InputError, match="record 3"):
        with ImportWriter(out) as writer:
            writer.lines("trajectories.jsonl").add({"id": "new"})
            writer.text("extra.txt", "x")
            raise InputError("record 3 is broken", tmp_path / "src.json")
    assert _files(out) == {"trajectories.jsonl": b"old\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_an_existing_out_gets_the_new_files_and_keeps_the_others(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    (out / "a.txt").write_text("old")
    with ImportWriter(out) as writer:
        writer.text("a.txt", "new")
    assert _files(out) == {"a.txt": b"new", "mine.txt": b"keep"}


def test_a_clash_with_a_folder_is_found_before_any_file_moves(tmp_path):
    out = tmp_path / "out"
    (out / "b.txt").mkdir(parents=True)
    with pytest.raises(InputError, match="in the way"):
        with ImportWriter(out) as writer:
            writer.text("a.txt", "new")
            writer.text("b.txt", "new")
    assert not (out / "a.txt").exists()


@pytest.mark.parametrize("name", ["../escape.txt", "/abs.txt", "a/../../b.txt", ""])
def test_nothing_is_written_outside_out(tmp_path, name):
    with pytest.raises(ValueError, match="only write below --out"):
        with ImportWriter(tmp_path / "out") as writer:
            writer.text(name, "x")
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out").exists()


def test_an_input_is_never_overwritten(tmp_path):
    src = tmp_path / "trajectories.jsonl"
    src.write_text("source\n")
    with protect([src]), pytest.raises(InputError, match="input of this import"):
        with ImportWriter(tmp_path) as writer:
            writer.lines("trajectories.jsonl")
    assert src.read_text() == "source\n"


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(InputError, match="must be a folder"):
        with ImportWriter(tmp_path / "out"):
            pass


def test_every_builtin_is_listed_with_a_description():
    assert set(BUILTIN) <= set(importer_names())
    result = CliRunner().invoke(main, ["import", "--help"])
    assert result.exit_code == 0, result.output
    formats = result.output.split("Formats:")[1]
    for name in BUILTIN:
        line = next(line for line in formats.splitlines() if line.strip().startswith(name + " "))
        assert "cannot be loaded" not in line and len(line.split(None, 1)[1]) > 10, line


def test_options_an_importer_does_not_take_are_refused(tmp_path):
    src = tmp_path / "chats.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert accepted_options(describe) == set()  # a function without the options takes none
    result = CliRunner().invoke(main, ["import", "openai-chat", str(src), "--out", str(tmp_path / "o"), "--draft-rubric"])
    assert result.exit_code == 2 and "does not take --draft-rubric" in result.output
    assert not (tmp_path / "o").exists()


def test_a_plugin_registered_under_the_entry_point_group_is_found_and_cannot_shadow_a_builtin(tmp_path, monkeypatch):
    """A real (if tiny) installed distribution on sys.path: importlib.metadata reads its entry points."""
    (tmp_path / "acme_importer.py").write_text(
        '"""``judgekit import acme``: Acme agent logs, one trajectory per line."""\n'
        "def run(src, out):\n    return []\n"
        "def fake_openai(src, out):\n    raise AssertionError('a plugin must not replace a built-in')\n",
        encoding="utf-8",
    )
    info = tmp_path / "acme_importer-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-importer\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[judgekit.importers]\nacme = acme_importer:run\nopenai-chat = acme_importer:fake_openai\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from judgekit.importers import get_importer
    from judgekit.importers.openai_chat import import_openai_chat

    assert "acme" in importer_names()
    assert get_importer("acme")(tmp_path, tmp_path) == []
    assert describe("acme") == "Acme agent logs, one trajectory per line."
    assert get_importer("openai-chat") is import_openai_chat
