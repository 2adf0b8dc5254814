"""LIBERO-Plus initial states (`.pruned_init`) read without torch and without a free pickle.

The files are torch-style zip archives whose `data.pkl` pickles one float64 NumPy array.
Only the four globals such a pickle names are admitted, each through a wrapper that
accepts just the arguments a plain float64 array needs, so a crafted file can build
nothing else and run nothing at all; torch storages (persistent ids) are refused.
"""

from __future__ import annotations

import importlib
import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from mailroom.orchestrator.packages.errors import PackageError

MAX_MEMBER_BYTES: Final = 64 * 1024 * 1024

# NumPy 1.x pickles name `numpy.core.multiarray`; NumPy 2 keeps it as `numpy._core`.
_NUMPY2: Final = np.lib.NumpyVersion(np.__version__) >= "2.0.0"
_MULTIARRAY: Final = "numpy._core.multiarray" if _NUMPY2 else "numpy.core.multiarray"
_numpy_reconstruct: Callable[..., Any] = importlib.import_module(_MULTIARRAY)._reconstruct


class InitStatesError(PackageError):
    """An initial-states file that cannot be trusted or read as a float64 state array."""


class _NdarrayToken:
    """Stands for `numpy.ndarray` inside the pickle: usable only as `_reconstruct`'s
    subtype, never callable, so the pickle cannot allocate arrays of its own shape."""

    __slots__ = ()


# The admitted globals are slot-less instances, not functions: a pickle's BUILD could
# otherwise rewrite a function's `__defaults__` and poison every later load.


class _Reconstruct:
    """The empty placeholder NumPy's `__reduce__` starts from; the pickle's own bytes fill
    it (BUILD), so its size is bounded by the member's."""

    __slots__ = ()

    def __call__(self, subtype: object, shape: object, typecode: object) -> npt.NDArray[Any]:
        if subtype is not _NDARRAY or shape != (0,) or typecode != b"b":
            raise pickle.UnpicklingError(
                f"_reconstruct({subtype!r}, {shape!r}, {typecode!r}) is not a plain array's"
            )
        array: npt.NDArray[Any] = _numpy_reconstruct(np.ndarray, (0,), b"b")
        return array


class _Encode:
    """How protocol 2 carries bytes: a latin-1 string, nothing else."""

    __slots__ = ()

    def __call__(self, text: object, encoding: object) -> bytes:
        if type(text) is not str or encoding != "latin1":
            raise pickle.UnpicklingError(f"_codecs.encode of {type(text).__name__} as {encoding!r}")
        return text.encode("latin1")


class _Dtype:
    """Only float64: an object dtype would let the array's state carry arbitrary objects."""

    __slots__ = ()

    def __call__(self, spec: object, align: object, copy: object) -> np.dtype[Any]:
        if spec != "f8" or type(spec) is not str or align is not False or copy is not True:
            raise pickle.UnpicklingError(f"dtype({spec!r}, {align!r}, {copy!r}) is not float64")
        return np.dtype("f8", align=False, copy=True)


_NDARRAY: Final = _NdarrayToken()
_ADMITTED: Final[dict[tuple[str, str], object]] = {
    ("numpy.core.multiarray", "_reconstruct"): _Reconstruct(),
    ("numpy", "ndarray"): _NDARRAY,
    ("_codecs", "encode"): _Encode(),
    ("numpy", "dtype"): _Dtype(),
}


class _StatesUnpickler(pickle.Unpickler):
    """Resolves only the admitted globals; every other import is refused before it runs."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ADMITTED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} is not admitted") from None

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError(f"persistent id {pid!r} (a torch storage) is not admitted")


def _data_pickle(path: Path) -> bytes:
    """The archive's one `<top>/data.pkl`, read no further than the cap."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = [
                info
                for info in archive.infolist()
                if PurePosixPath(info.filename).name == "data.pkl"
            ]
            if len(members) != 1 or len(PurePosixPath(members[0].filename).parts) != 2:
                found = [info.filename for info in members]
                raise InitStatesError(f"{path}: expected one <top>/data.pkl member, found {found}")
            member = members[0]
            if member.file_size > MAX_MEMBER_BYTES:
                raise InitStatesError(
                    f"{path}: {member.filename} is {member.file_size} bytes, "
                    f"over the {MAX_MEMBER_BYTES}-byte cap"
                )
            with archive.open(member) as stream:
                data = stream.read(MAX_MEMBER_BYTES + 1)
    except InitStatesError:
        raise
    except zipfile.BadZipFile as error:
        raise InitStatesError(f"{path}: not a zip archive ({error})") from error
    # zipfile's own refusals: encrypted (RuntimeError), unsupported method, truncated.
    except (OSError, EOFError, RuntimeError, NotImplementedError, ValueError) as error:
        raise InitStatesError(f"{path}: unreadable archive ({error})") from error
    if len(data) > MAX_MEMBER_BYTES:
        raise InitStatesError(f"{path}: {member.filename} is over the {MAX_MEMBER_BYTES}-byte cap")
    return data


def load_pruned_init(path: Path) -> npt.NDArray[np.float64]:
    """The file's states, one row per initial state: a layout task's 1-D array becomes
    one row, as LIBERO-Plus reshapes it."""
    data = _data_pickle(path)
    try:
        loaded = _StatesUnpickler(io.BytesIO(data)).load()
    except Exception as error:  # every failure of a refused or malformed pickle
        raise InitStatesError(f"{path}: refused pickle ({error})") from error
    # Either byte order is float64; a structured or any other dtype is not.
    if type(loaded) is not np.ndarray or loaded.dtype.newbyteorder("=") != np.float64:
        described = getattr(loaded, "dtype", type(loaded).__name__)
        raise InitStatesError(f"{path}: holds {described}, not a float64 array")
    if loaded.ndim not in (1, 2):
        raise InitStatesError(f"{path}: holds a {loaded.ndim}-D array, not 1-D or 2-D")
    states = np.ascontiguousarray(loaded, dtype=np.float64)
    if states.ndim == 1:
        states = states.reshape(1, -1)
    if not np.isfinite(states).all():
        raise InitStatesError(f"{path}: holds non-finite values")
    return states
