"""Memory a simulator process holds but never reads again, given back to the kernel.

Measured here (one process, LIBERO scenes): a compiled scene's model is ~250 MB, 180 MB
of it texture data (4096² textures), which only the render context's upload reads;
glibc keeps ~160 MB freed by a hard reset. Neither changes a delivered byte.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

_MADV_DONTNEED = 4
_PAGE = os.sysconf("SC_PAGE_SIZE")
_libc: Any = None


def _c_library() -> Any:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.madvise.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
        _libc = libc
    return _libc


def drop_pages(array: Any) -> int:
    """Give back the pages wholly inside `array`'s buffer; they read as zeros after.

    Only for data nothing reads again: a simulator's own model copy's `tex_data` once its
    render context holds the textures (physics and scene updates never read it). Returns
    the bytes given back (0 if the kernel refused).
    """
    start = int(array.ctypes.data)
    end = start + int(array.nbytes)
    first, last = -(-start // _PAGE) * _PAGE, end // _PAGE * _PAGE
    if last <= first:
        return 0
    if _c_library().madvise(first, last - first, _MADV_DONTNEED) != 0:
        return 0
    return last - first


def trim_heap() -> None:
    """Return the C heap's free memory to the kernel (glibc `malloc_trim`)."""
    _c_library().malloc_trim(0)
