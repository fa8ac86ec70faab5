"""Confine this process, then exec the Node host: ``python -I -m streameval.sandbox._launch``.

Arguments: ``--data-mb N --allow-weaker 0|1 [--node-dir DIR] -- /path/to/node [node args...]``. The
launcher applies what node cannot apply to itself (it has no prctl): uid nobody when root, user +
network namespace, rlimits (data segment, file size 0, descriptors, no core), Landlock read-only on
node's binary, the system libraries and the host's node directory (``--node-dir``, by default the
package's; the worker passes a readable copy when the package is private, see ``_stage``), and the
"node-host" seccomp filter. Then it execs node with an empty environment. A missing mechanism, or a
file the host's user cannot read, is reported on stdout as an error frame (a missing mechanism only
unless weaker confinement is allowed), so the worker can name it.
"""

from __future__ import annotations

import argparse
import os
import resource
from pathlib import Path

from . import _confine
from ._wire import write_frame

__all__ = ["NODE_DIR", "main", "node_read_paths", "unreadable"]

NODE_DIR = Path(__file__).resolve().parent / "node"
_NOFILE = 64  # node opens ~20 descriptors (epoll, eventfds, signal pipe, stdio)
_SYSTEM_READ = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache")


def node_read_paths(node: str, node_dir: Path = NODE_DIR) -> list[str]:
    """What the host may read: the node binary, the shared libraries it loads, the sandbox dir."""
    paths = [os.path.realpath(node), str(node_dir)]
    # A node installed under a prefix (e.g. /usr/local/bin/node) may bring its own lib dir.
    prefix_lib = Path(os.path.realpath(node)).parent.parent / "lib"
    candidates = [*_SYSTEM_READ, str(prefix_lib)]
    paths += [p for p in candidates if os.path.exists(p)]
    return list(dict.fromkeys(paths))


def unreadable(node: str, node_dir: Path) -> str | None:
    """Why this process (as it now is) cannot start the host from these files, or None."""
    wanted = [
        (node, os.X_OK, "run"),
        (str(node_dir), os.R_OK | os.X_OK, "read"),
        (str(node_dir / "openssl.cnf"), os.R_OK, "read"),
    ]
    for path, mode, verb in wanted:
        if os.access(path, mode):
            continue
        closed = [p for p in reversed(Path(path).parents) if not os.access(p, os.X_OK)]
        why = f"it may not enter {closed[0]}" if closed else "its permissions exclude this user"
        who = "uid nobody (65534; the worker runs as root)" if os.getuid() == 65534 else f"uid {os.getuid()}"
        fix = (
            "install Node.js where every user may run it (such as /usr/bin/node) or point STREAMEVAL_NODE at one"
            if verb == "run"
            else "install streameval where every user may read it"
        )
        return f"the Node.js sandbox host runs as {who} and cannot {verb} {path} ({why}): {fix}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(prog="streameval.sandbox._launch")
    parser.add_argument("--data-mb", type=int, required=True)
    parser.add_argument("--allow-weaker", type=int, default=0)
    parser.add_argument("--node-dir", type=Path, default=NODE_DIR)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    mechanisms = _confine.probe()
    if mechanisms.missing and not options.allow_weaker:
        write_frame(
            1,
            {
                "error": "refusing to run code evaluators: this machine lacks "
                + "; ".join(mechanisms.missing)
                + " (set STREAMEVAL_ALLOW_WEAKER_SANDBOX=1 to run with weaker confinement)"
            },
        )
        return
    ruleset = (
        _confine.landlock_ruleset(mechanisms.landlock_abi, node_read_paths(argv[0], options.node_dir))
        if mechanisms.landlock_abi
        else -1
    )
    _confine.drop_root()
    problem = unreadable(argv[0], options.node_dir)
    if problem:
        write_frame(1, {"error": problem})
        return
    if mechanisms.user_namespaces:
        _confine.unshare_network()
    _confine.set_limit(resource.RLIMIT_CORE, 0)
    _confine.set_limit(resource.RLIMIT_FSIZE, 0)
    _confine.set_limit(resource.RLIMIT_NOFILE, _NOFILE)
    _confine.set_limit(resource.RLIMIT_DATA, options.data_mb * 2**20)
    _confine.set_no_new_privs()
    if ruleset >= 0:
        _confine.landlock_restrict(ruleset)
    if mechanisms.seccomp:
        _confine.apply_seccomp(_confine.seccomp_program("node-host"))
    os.execve(argv[0], argv, {})


if __name__ == "__main__":
    main()
