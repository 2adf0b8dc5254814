"""The sandbox's system-call filter, built with libseccomp (Debian's `libseccomp2`).

Everything is allowed except calls that reach beyond the actor's own processes or
files: `ptrace` and the cross-process memory calls (the sandbox's pid 1 runs as the
actor's own user, and a tracer could clear its parent-death signal and outlive the
episode), the kernel keyrings (shared with the evaluator's session, and a channel
between episodes), io_uring, perf events, BPF and userfaultfd. Each fails with EPERM.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "bpf",
    "userfaultfd",
)
_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_RESOLVE_FAILED = -10101  # __NR_SCMP_ERROR


class SeccompUnavailableError(OSError):
    """libseccomp cannot be loaded or refused to build the filter."""


@functools.cache
def filter_program() -> bytes:
    """The filter as the kernel's BPF program, for `bwrap --seccomp FD`."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SeccompUnavailableError(
            f"libseccomp is not installed (Debian package libseccomp2): {exc}"
        ) from exc
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(_ACT_ALLOW)
    if not context:
        raise SeccompUnavailableError("seccomp_init failed")
    fd = os.memfd_create("seccomp-filter", os.MFD_CLOEXEC)
    try:
        for name in DENIED:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number == _RESOLVE_FAILED:
                continue  # not a call of this architecture
            if lib.seccomp_rule_add(context, _ACT_ERRNO | errno.EPERM, number, 0) != 0:
                raise SeccompUnavailableError(f"seccomp_rule_add({name}) failed")
        if lib.seccomp_export_bpf(context, fd) != 0:
            raise SeccompUnavailableError("seccomp_export_bpf failed")
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
        lib.seccomp_release(context)
