"""Kernel confinement primitives: user+network namespaces, Landlock, seccomp-BPF and rlimits.

Everything here is plain ``ctypes`` over libc and raw syscalls, so it needs nothing installed beyond
Python: the seccomp program is assembled by hand (no libseccomp), which keeps a fresh machine or a
slim container image working from the project's own files.

What each mechanism blocks (see docs/sandbox.md):

- network namespace (in a new user namespace): no interface but a downed loopback, so no TCP, UDP or
  DNS can leave, whatever the code manages to call;
- Landlock: file access. The Python child gets a ruleset that handles every file right and grants
  none (no open, read, write, list, exec); the Node host gets read-only access to node's own files
  and the sandbox modules. With ABI >= 4 TCP bind/connect are denied too, with ABI >= 6 signals to
  processes outside the sandbox and abstract UNIX sockets are;
- seccomp: a deny list of syscalls (open*, socket/connect/bind/listen/accept, exec*, fork/clone of
  processes, ptrace, mount, namespaces, signals to other processes, io_uring, bpf, kernel modules...)
  answered with EPERM, so the code sees a clear ``PermissionError`` instead of a dead process;
- rlimits: address space or data size (memory), CPU seconds, file size 0, few descriptors, no core.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Mechanisms",
    "SeccompProgram",
    "apply_seccomp",
    "drop_root",
    "landlock_abi",
    "landlock_restrict",
    "landlock_ruleset",
    "probe",
    "seccomp_program",
    "set_limit",
    "set_no_new_privs",
    "unshare_network",
]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

# Landlock: syscall numbers are the same on every architecture (asm-generic 444-446).
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
# Rights handled per ABI version: 1 = bits 0-12, 2 adds REFER, 3 TRUNCATE, 5 IOCTL_DEV.
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


# -- probing -------------------------------------------------------------------------------------
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    result = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    return int(result) if result > 0 else 0


@dataclass(frozen=True, slots=True)
class Mechanisms:
    """What this machine offers. ``missing`` names each absent mechanism in words an operator can act on."""

    user_namespaces: bool
    landlock_abi: int
    seccomp: bool

    @property
    def missing(self) -> list[str]:
        missing = []
        if not self.user_namespaces:
            missing.append("unprivileged user namespaces (needed for the network namespace)")
        if self.landlock_abi < 1:
            missing.append("Landlock (kernel >= 5.13 with lsm=landlock)")
        if not self.seccomp:
            missing.append(f"seccomp filters for this architecture ({platform.machine()})")
        return missing


def probe() -> Mechanisms:
    """Check each mechanism for real (a forked child tries to unshare), without changing this process."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0 if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    userns = os.waitstatus_to_exitcode(status) == 0
    seccomp = _ARCH in _TABLES and os.path.exists("/proc/sys/kernel/seccomp/actions_avail")
    return Mechanisms(user_namespaces=userns, landlock_abi=landlock_abi(), seccomp=seccomp)


# -- namespaces, identity, limits ------------------------------------------------------------
def drop_root() -> None:
    """When running as root, become nobody: a sandbox should never hold real root's identity."""
    if os.geteuid() != 0:
        return
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)


def unshare_network() -> None:
    """Move this process into new user and network namespaces (no route to anywhere)."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")


def set_limit(which: int, value: int) -> None:
    """Set soft and hard limit, so the confined code cannot raise it back."""
    resource.setrlimit(which, (value, value))


def set_no_new_privs() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


# -- Landlock ----------------------------------------------------------------------------------
def landlock_ruleset(abi: int, read_only: Sequence[str] = ()) -> int:
    """A ruleset fd handling every right ``abi`` knows; ``read_only`` paths get read (+exec) access.

    With no paths, the ruleset denies all file access once applied; network (ABI >= 4) and
    scoping of signals and abstract UNIX sockets (ABI >= 6) are denied too.
    """
    fs = _FS_BY_ABI.get(abi, _FS_BY_ABI[5])
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", fs, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", fs, net)
    else:
        attr = struct.pack("=Q", fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = _check(
        int(_libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buf, len(attr), 0)), "landlock_create_ruleset"
    )
    try:
        for path in read_only:
            _allow_read(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _allow_read(ruleset: int, path: str) -> None:
    target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        is_dir = os.path.isdir(path)
        access = FS_READ_FILE | FS_EXECUTE | (FS_READ_DIR if is_dir else 0)
        attr = struct.pack("=Qi", access, target)  # struct landlock_path_beneath_attr is packed
        buf = ctypes.create_string_buffer(attr, len(attr))
        _check(
            int(_libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, buf, 0)),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(target)


def landlock_restrict(ruleset: int) -> None:
    """Apply a ruleset to this process (needs no_new_privs) and close it."""
    try:
        _check(int(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


# -- seccomp -----------------------------------------------------------------------------------
_ARCH = platform.machine()
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Syscall numbers: arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
_TABLES: dict[str, dict[str, int]] = {
    "x86_64": {
        "open": 2,
        "openat": 257,
        "openat2": 437,
        "creat": 85,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "socket": 41,
        "connect": 42,
        "accept": 43,
        "bind": 49,
        "listen": 50,
        "accept4": 288,
        "execve": 59,
        "execveat": 322,
        "fork": 57,
        "vfork": 58,
        "clone": 56,
        "clone3": 435,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "unshare": 272,
        "setns": 308,
        "kill": 62,
        "tkill": 200,
        "tgkill": 234,
        "rt_sigqueueinfo": 129,
        "rt_tgsigqueueinfo": 297,
        "pidfd_open": 434,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "memfd_create": 319,
        "memfd_secret": 447,
        "setrlimit": 160,
        "prlimit64": 302,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "acct": 163,
        "personality": 135,
        "quotactl": 179,
        "syslog": 103,
    },
    "aarch64": {
        "openat": 56,
        "openat2": 437,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "socket": 198,
        "bind": 200,
        "listen": 201,
        "accept": 202,
        "connect": 203,
        "accept4": 242,
        "execve": 221,
        "execveat": 281,
        "clone": 220,
        "clone3": 435,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "unshare": 97,
        "setns": 268,
        "kill": 129,
        "tkill": 130,
        "tgkill": 131,
        "rt_sigqueueinfo": 138,
        "rt_tgsigqueueinfo": 240,
        "pidfd_open": 434,
        "pidfd_send_signal": 424,
        "pidfd_getfd": 438,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "memfd_create": 279,
        "memfd_secret": 447,
        "setrlimit": 164,
        "prlimit64": 261,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "acct": 89,
        "personality": 92,
        "quotactl": 60,
        "syslog": 116,
    },
}

# Common to both profiles: nothing may reach the network, other processes, the kernel's
# module/bpf/mount machinery, or escape seccomp through io_uring.
_DENY_ALWAYS = (
    "socket",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "execveat",
    "fork",
    "vfork",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "memfd_create",
    "memfd_secret",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "personality",
    "quotactl",
    "syslog",
)
# The Python child also may not open files, exec, create threads or touch its limits.
_DENY_PYTHON_CHILD = (
    "open",
    "openat",
    "openat2",
    "creat",
    "open_by_handle_at",
    "name_to_handle_at",
    "execve",
    "clone",
    "clone3",
    "setrlimit",
    "prlimit64",
)
# The Node host needs open (read-only via Landlock), threads and one execve (the launcher's exec of
# node itself; Landlock lets it execute only node): clone is allowed only with CLONE_THREAD, clone3
# answers ENOSYS so libc falls back to clone, whose flags a filter can inspect.
_DENY_NODE = ("open_by_handle_at", "name_to_handle_at")

SeccompProgram = bytes

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(profile: str) -> SeccompProgram:
    """The BPF filter for ``profile`` ("python-child" or "node-host") on this architecture.

    Denied syscalls return EPERM; a foreign architecture (e.g. 32-bit calls on x86_64) kills the
    process, since its numbers mean different syscalls.
    """
    table = _TABLES.get(_ARCH)
    if table is None:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for architecture {_ARCH}")
    names = _DENY_ALWAYS + (_DENY_PYTHON_CHILD if profile == "python-child" else _DENY_NODE)
    denied = sorted({table[name] for name in names if name in table})
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH[_ARCH]),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if _ARCH == "x86_64":  # the x32 ABI sets bit 30 of nr: refuse it wholesale
        prog += [_insn(_JGE_K, 0, 1, 0x40000000), _insn(_RET_K, 0, 0, eperm)]
    for nr in denied:
        prog += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, eperm)]
    if profile == "node-host":
        prog += [
            _insn(_JEQ_K, 0, 1, table["clone3"]),
            _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
            _insn(_JEQ_K, 0, 4, table["clone"]),
            _insn(_LD_W_ABS, 0, 0, 16),  # low word of args[0] (clone flags) on little-endian
            _insn(_JSET_K, 0, 1, CLONE_THREAD),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
            _insn(_RET_K, 0, 0, eperm),
        ]
    prog.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_seccomp(program: SeccompProgram) -> None:
    """Install ``program`` on this (single-threaded) process; needs no_new_privs first."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    _check(
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)"
    )
