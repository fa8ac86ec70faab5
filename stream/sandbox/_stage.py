"""Where the Node host reads its files: the package's ``node/`` directory, or a readable copy of it.

A worker running as root starts each Node host as uid nobody (see ``_launch``). Nobody must then
open ``host.js``, ``openssl.cnf`` and ``node_modules`` by their absolute paths (node resolves every
module to one), which fails when the package sits under a directory only its owner may enter: a
checkout in ``mktemp -d`` or in ``/root``, a virtualenv in a private home. In that case (only then)
the directory is laid out once per process in a fresh directory under the temporary directory:
root-owned, mode 0755, files 0644 (hard links where the file already is world-readable and on the
same file system, copies otherwise), removed when the process exits. Nothing in it is secret: it
is the package's own files and the pinned modules.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ._errors import SandboxUnavailable
from ._launch import NODE_DIR

__all__ = ["host_node_dir", "others_can_read"]

# (pid, source) -> what the host reads; a forked child decides anew
_CHOSEN: dict[tuple[int, Path], Path] = {}
_READ_DIR = stat.S_IROTH | stat.S_IXOTH


def others_can_read(root: Path) -> bool:
    """True when a user with no relation to the files (nobody) can reach and read all of ``root``.

    Conservative: a symbolic link inside counts as unreadable (its target's parents are not checked).
    """
    root = root.resolve()
    if any(not os.stat(parent).st_mode & stat.S_IXOTH for parent in root.parents):
        return False
    for directory, dirs, files in os.walk(root):
        if os.stat(directory).st_mode & _READ_DIR != _READ_DIR:
            return False
        for name in (*dirs, *files):
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISLNK(mode) or not mode & stat.S_IROTH:
                return False
    return True


def host_node_dir(source: Path = NODE_DIR) -> Path:
    """The directory the Node host should read: ``source`` itself unless uid nobody could not read it."""
    if os.geteuid() != 0:
        return source
    key = (os.getpid(), source)
    chosen = _CHOSEN.get(key)
    if chosen is None or not chosen.is_dir():
        chosen = _CHOSEN[key] = source if others_can_read(source) else _stage(source)
    return chosen


def _stage_parent() -> str:
    """A temporary directory that nobody can enter and nobody else can replace our entry in."""
    candidates = dict.fromkeys([tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"])
    for candidate in candidates:
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        path = Path(candidate).resolve()
        reachable = all(os.stat(p).st_mode & stat.S_IXOTH for p in (path, *path.parents))
        writable_by_others = mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX
        if stat.S_ISDIR(mode) and reachable and not writable_by_others:
            return str(path)
    raise SandboxUnavailable(
        f"the Node.js sandbox host runs as uid nobody and cannot read {NODE_DIR} (a parent directory "
        f"admits only its owner), and no temporary directory ({', '.join(candidates)}) is open to other "
        "users for a readable copy: set TMPDIR to a directory every user may enter (such as /tmp), or "
        "install streameval where every user may read it"
    )


def _link_or_copy(src: str, dst: str) -> str:
    if os.stat(src).st_mode & stat.S_IROTH:
        try:
            os.link(src, dst)
            return dst
        except OSError:  # another file system, or links refused: copy
            pass
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    return dst


def _stage(source: Path) -> Path:
    staged = Path(tempfile.mkdtemp(prefix="streameval-node-", dir=_stage_parent()))
    atexit.register(_remove, staged, os.getpid())
    target = staged / "node"
    try:
        shutil.copytree(source, target, ignore_dangling_symlinks=True, copy_function=_link_or_copy)
        for directory, _, _ in os.walk(staged):
            os.chmod(directory, 0o755)
    except OSError as exc:
        shutil.rmtree(staged, ignore_errors=True)
        raise SandboxUnavailable(
            f"the Node.js sandbox host runs as uid nobody and cannot read {source}, and copying it "
            f"to {staged} failed ({exc}); install streameval where every user may read it"
        ) from exc
    return target


def _remove(staged: Path, pid: int) -> None:
    if os.getpid() == pid:
        shutil.rmtree(staged, ignore_errors=True)
