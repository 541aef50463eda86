"""Files judgekit writes: atomically, with the modes the umask (or the replaced file) says, and
``ensure_writable`` proving a path can be written before a long run, leaving nothing behind.

Modes are checked in real child processes with their own umask; permission failures in a child
dropped to an unprivileged user (root ignores file modes), a read-only file system in a private
mount namespace where the machine allows one.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from judgekit._util.files import current_umask, ensure_writable, write_text_atomically
from judgekit.errors import InputError

NOBODY = 65534


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def write_with_umask(umask: int, path: Path, text: str = "x\n") -> subprocess.CompletedProcess:
    code = ("import os, sys; os.umask(int(sys.argv[1], 8)); from judgekit._util.files import current_umask, "
            "write_text_atomically; write_text_atomically(sys.argv[2], 'x\\n'); print(oct(current_umask()))")
    return subprocess.run([sys.executable, "-c", code, oct(umask)[2:], str(path)], capture_output=True, text=True,
                          check=True, timeout=60)


@pytest.mark.parametrize("umask", [
    pytest.param(0o022, id="022_usual"),
    pytest.param(0o002, id="002_group_writable"),
    pytest.param(0o077, id="077_private"),
    pytest.param(0o027, id="027_group_read"),
    pytest.param(0o000, id="000_world_writable"),
])
def test_a_new_file_follows_the_umask(tmp_path: Path, umask: int):
    target = tmp_path / "deep" / "run.json"
    done = write_with_umask(umask, target)
    assert mode_of(target) == 0o666 & ~umask
    assert done.stdout.strip() == oct(umask)  # read without changing it
    assert target.read_text() == "x\n"
    assert os.listdir(target.parent) == ["run.json"]  # no temporary file left


@pytest.mark.parametrize("mode", [
    pytest.param(0o640, id="640"),
    pytest.param(0o600, id="600"),
    pytest.param(0o755, id="755_executable"),
    pytest.param(0o444, id="444_read_only_file_in_a_writable_folder"),
])
def test_a_replaced_file_keeps_its_mode(tmp_path: Path, mode: int):
    target = tmp_path / "lock.json"
    target.write_text("old\n")
    target.chmod(mode)
    write_with_umask(0o077, target)  # a umask that would otherwise narrow it
    assert mode_of(target) == mode and target.read_text() == "x\n"
    assert os.listdir(tmp_path) == ["lock.json"]


def test_current_umask_is_the_process_umask_and_unchanged():
    before = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert current_umask() == 0o027  # reading it did not change it
    finally:
        os.umask(before)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path):
    target = tmp_path / "run.json"
    target.write_text("kept\n")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(target, "half\ud800")  # fails mid-write: a lone surrogate is not UTF-8
    assert target.read_text() == "kept\n" and os.listdir(tmp_path) == ["run.json"]


@pytest.mark.parametrize("make, message", [
    pytest.param(lambda p: p.mkdir(), "is a folder, expected a file to write", id="folder"),
    pytest.param(lambda p: os.mkfifo(p), "not a regular file (a device, FIFO or socket); cannot replace it", id="fifo"),
    pytest.param(lambda p: p.symlink_to("/dev/null"), "not a regular file (a device, FIFO or socket); cannot replace it",
                 id="link_to_dev_null"),
])
def test_write_never_renames_over_what_is_not_a_regular_file(tmp_path: Path, make, message):
    target = tmp_path / "out.json"
    make(target)
    kind = os.lstat(target).st_mode
    with pytest.raises(InputError) as err:
        write_text_atomically(target, "{}\n")
    assert str(err.value) == f"{target}: {message}"
    assert os.lstat(target).st_mode == kind and os.listdir(tmp_path) == ["out.json"]
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize("relative", [
    pytest.param("plain/out.json", id="parent"), pytest.param("plain/a/b/out.json", id="ancestor")])
def test_write_into_a_parent_that_is_a_file_names_both(tmp_path: Path, relative: str):
    (tmp_path / "plain").write_text("a file\n")
    with pytest.raises(InputError) as err:
        write_text_atomically(tmp_path / relative, "{}\n")
    assert str(err.value) == f"{tmp_path / relative}: cannot write: {tmp_path / 'plain'} is not a folder"
    assert (tmp_path / "plain").read_text() == "a file\n" and os.listdir(tmp_path) == ["plain"]


def test_write_where_the_folder_cannot_be_written_names_the_path():
    if not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    with pytest.raises(InputError) as err:
        write_text_atomically("/proc/judgekit-run.json", "{}\n")
    assert str(err.value) == "/proc/judgekit-run.json: cannot write: No such file or directory"


# --- ensure_writable -----------------------------------------------------------------------------


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("relative", [
    pytest.param("out.json", id="new_file"),
    pytest.param("a/b/c/out.json", id="missing_parents_not_created"),
    pytest.param("existing.json", id="existing_file"),
    pytest.param("read-only.json", id="read_only_file_is_replaced_not_written"),
])
def test_ensure_writable_accepts_and_leaves_nothing(tmp_path: Path, relative: str):
    (tmp_path / "existing.json").write_text("old\n")
    (tmp_path / "read-only.json").write_text("old\n")
    (tmp_path / "read-only.json").chmod(0o444)
    before = listing(tmp_path)
    ensure_writable(tmp_path / relative)
    assert listing(tmp_path) == before
    assert (tmp_path / "existing.json").read_text() == "old\n"


@pytest.mark.parametrize("setup, relative, message", [
    pytest.param(lambda t: (t / "out").mkdir(), "out", "is a folder, expected a file to write", id="folder_at_path"),
    pytest.param(lambda t: (t / "f").write_text("x"), "f/out.json", "cannot write: {t}/f is not a folder",
                 id="parent_is_a_file"),
    pytest.param(lambda t: (t / "f").write_text("x"), "f/a/b/out.json", "cannot write: {t}/f is not a folder",
                 id="ancestor_is_a_file"),
    pytest.param(lambda t: (t / "gone").symlink_to(t / "nowhere"), "gone/out.json",
                 "cannot write: {t}/gone is not a folder", id="parent_is_a_dangling_link"),
    pytest.param(lambda t: os.mkfifo(t / "fifo"), "fifo", "not a regular file (a device, FIFO or socket); cannot write it",
                 id="fifo_at_path"),
])
def test_ensure_writable_refuses_naming_the_path(tmp_path: Path, setup, relative: str, message: str):
    setup(tmp_path)
    before = listing(tmp_path)
    with pytest.raises(InputError) as err:
        ensure_writable(tmp_path / relative)
    assert str(err.value) == f"{tmp_path / relative}: {message.format(t=tmp_path)}"
    assert listing(tmp_path) == before


@pytest.mark.parametrize("path, message", [
    pytest.param("/dev/null", "/dev/null: not a regular file (a device, FIFO or socket); cannot write it", id="dev_null"),
    pytest.param("/proc/judgekit-out.json", "/proc/judgekit-out.json: cannot write: cannot create a file in /proc: ",
                 id="proc_refuses_new_files"),
])
def test_ensure_writable_refuses_system_paths(path: str, message: str):
    if not Path("/proc/self").exists():
        pytest.skip("no /proc on this system")
    with pytest.raises(InputError) as err:
        ensure_writable(path)
    assert str(err.value).startswith(message)
    assert not Path(path).exists() or Path(path).is_char_device()


def _as_nobody(path: Path) -> str:
    """``ensure_writable(path)`` in a forked child running as uid/gid 65534: the error text, or
    '' when it passed. Forked, not exec'd, because that user may not read the interpreter."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                ensure_writable(path)
            except InputError as exc:
                os.write(write, str(exc).encode())
        except BaseException:  # noqa: BLE001 - report it, never run pytest's code in the child
            code = 3
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child could not drop to uid 65534"
    return text


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_ensure_writable_refuses_a_folder_without_write_permission():
    with tempfile.TemporaryDirectory(dir="/tmp" if Path("/tmp").is_dir() else None) as name:
        folder = Path(name)
        (folder / "sub").mkdir()
        folder.chmod(0o755)
        (folder / "sub").chmod(0o555)
        try:
            if os.geteuid() == 0:
                if os.stat(folder.parent).st_mode & 0o001 == 0:
                    pytest.skip(f"{folder.parent} is not searchable by other users")
                check = _as_nobody
            else:
                def check(path: Path) -> str:
                    try:
                        ensure_writable(path)
                    except InputError as exc:
                        return str(exc)
                    return ""
            assert check(folder / "sub" / "out.json") == (
                f"{folder}/sub/out.json: cannot write: cannot create a file in {folder}/sub: Permission denied")
            assert check(folder / "sub" / "new" / "out.json").endswith(f"in {folder}/sub: Permission denied")
            assert sorted(os.listdir(folder / "sub")) == []
            if os.geteuid() == 0:  # the same path is writable for its owner
                assert check(folder / "elsewhere.json").endswith("Permission denied")
                ensure_writable(folder / "sub" / "out.json")
        finally:
            (folder / "sub").chmod(0o755)


def test_ensure_writable_refuses_a_read_only_file_system(tmp_path: Path):
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to mount a read-only file system in a private namespace")
    folder = tmp_path / "ro"
    folder.mkdir()
    code = ("import sys\nfrom judgekit._util.files import ensure_writable\nfrom judgekit.errors import InputError\n"
            "try:\n    ensure_writable(sys.argv[1])\nexcept InputError as exc:\n    print(exc)\n")
    script = 'mount -t tmpfs -o ro,size=64k none "$1" && exec "$2" -c "$3" "$1/out.json"'
    done = subprocess.run([unshare, "-m", "sh", "-c", script, "sh", str(folder), sys.executable, code],
                          capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and "mount" in done.stderr + done.stdout and not done.stdout:
        pytest.skip(f"cannot mount in a private namespace here: {done.stderr.strip()}")
    assert done.stdout.strip() == f"{folder}/out.json: cannot write: cannot create a file in {folder}: Read-only file system"
    assert os.listdir(folder) == []  # outside the namespace: untouched
