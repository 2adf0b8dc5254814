"""LIBERO-Plus initial states: the real files load without torch, crafted ones never run."""

from __future__ import annotations

import io
import pickle
import time
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from mailroom.benchmarks.libero_plus import init_states as plus_states
from mailroom.benchmarks.libero_plus.init_states import InitStatesError, load_pruned_init
from mailroom.orchestrator.packages.errors import PackageError

SITE = Path(np.__file__).resolve().parents[1]
PLUS_INIT = SITE / "liberoplus" / "liberoplus" / "init_files"
GOAL_FILE = PLUS_INIT / "libero_goal" / "put_the_bowl_on_the_plate.pruned_init"
LAYOUT_FILE = (
    PLUS_INIT
    / "libero_newobj"
    / "libero_mix"
    / "pick_up_the_milk_and_place_it_in_the_basket_add_23"
    ".pruned_init"
)
PRO_GOAL_FILE = (
    SITE / "libero" / "libero" / "init_files" / "libero_goal" / "put_the_bowl_on_the_plate"
    ".pruned_init.npz"
)


def archive(path: Path, members: dict[str, bytes], *, deflate: bool = False) -> Path:
    """A torch-style zip archive holding `members`."""
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=method) as out:
        for name, data in members.items():
            out.writestr(name, data)
    return path


def states_file(path: Path, data_pkl: bytes) -> Path:
    return archive(path, {"archive/data.pkl": data_pkl, "archive/version": b"3\n"})


def numpy1_pickle(array: npt.NDArray[np.generic]) -> bytes:
    """`array` pickled as NumPy 1.x (which wrote the released files) names its globals."""
    return pickle.dumps(array, protocol=2).replace(
        b"numpy._core.multiarray", b"numpy.core.multiarray"
    )


def global_reduce(module: str, name: str, argument: str) -> bytes:
    """GLOBAL module.name, called on one string argument (protocol 0 opcodes)."""
    return f"c{module}\n{name}\n(V{argument}\ntR.".encode()


def refused(path: Path, *fragments: str) -> InitStatesError:
    with pytest.raises(InitStatesError) as caught:
        load_pruned_init(path)
    message = str(caught.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return caught.value


# --- the released files ---------------------------------------------------------------


def test_real_file_equals_the_libero_pro_array() -> None:
    states = load_pruned_init(GOAL_FILE)
    expected = np.load(PRO_GOAL_FILE, allow_pickle=False)["states"]
    assert states.dtype == np.float64 and states.shape == (50, 79)
    assert np.array_equal(states, expected)
    assert states.flags.c_contiguous and states.flags.writeable


def test_layout_file_becomes_one_row() -> None:
    with zipfile.ZipFile(LAYOUT_FILE) as raw:
        (member,) = [name for name in raw.namelist() if name.endswith("/data.pkl")]
        flat = pickle.loads(raw.read(member))  # the package's own (trusted) file
    assert flat.ndim == 1
    states = load_pruned_init(LAYOUT_FILE)
    assert states.shape == (1, flat.size)
    assert np.array_equal(states[0], flat)


def test_every_packaged_file_loads() -> None:
    files = [path for path in PLUS_INIT.rglob("*.pruned_init") if path.is_file()]
    assert len(files) > 1000
    for path in files:
        states = load_pruned_init(path)
        assert states.ndim == 2 and states.shape[0] >= 1, path


def test_numpy1_style_pickles_load(tmp_path: Path) -> None:
    """The synthetic files below differ from a loadable one only in what they attack."""
    matrix = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(
        load_pruned_init(states_file(tmp_path / "m", numpy1_pickle(matrix))), matrix
    )
    swapped = matrix.astype(">f8")
    loaded = load_pruned_init(states_file(tmp_path / "s", numpy1_pickle(swapped)))
    assert loaded.dtype == np.float64 and np.array_equal(loaded, matrix)
    assert load_pruned_init(states_file(tmp_path / "v", numpy1_pickle(np.ones(5)))).shape == (1, 5)


def test_error_is_a_package_error() -> None:
    """An episode records it as a simulator exception (tests/unit/test_runner_evidence.py)."""
    assert issubclass(InitStatesError, PackageError)


# --- pickles that would run code ------------------------------------------------------


def _code_payloads(marker: Path) -> dict[str, bytes]:
    class PopenReduce:
        def __reduce__(self) -> tuple[object, tuple[object, ...]]:
            import subprocess

            return subprocess.Popen, (["touch", str(marker)],)

    return {
        "os.system": global_reduce("os", "system", f"touch {marker}"),
        "posix.system": global_reduce("posix", "system", f"touch {marker}"),
        "builtins.eval": global_reduce(
            "builtins", "eval", f"__import__('pathlib').Path({str(marker)!r}).touch()"
        ),
        "subprocess.Popen": pickle.dumps(PopenReduce(), protocol=4),  # STACK_GLOBAL
    }


def test_the_code_payloads_are_live(tmp_path: Path) -> None:
    """Control: plain pickle does run them, so the refusals below are not vacuous."""
    marker = tmp_path / "ran"
    pickle.loads(_code_payloads(marker)["builtins.eval"])
    assert marker.exists()


@pytest.mark.parametrize(
    "payload", ["os.system", "posix.system", "builtins.eval", "subprocess.Popen"]
)
def test_code_execution_is_refused(tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "ran"
    path = states_file(tmp_path / "evil.pruned_init", _code_payloads(marker)[payload])
    refused(path, "refused pickle", "not admitted")
    time.sleep(0.2)  # a Popen that slipped through would have touched it by now
    assert not marker.exists()


def test_numpy2_global_name_is_not_admitted(tmp_path: Path) -> None:
    path = states_file(tmp_path / "n2", pickle.dumps(np.ones(3), protocol=2))
    refused(path, "numpy._core.multiarray._reconstruct is not admitted")


def test_object_dtype_array_is_refused(tmp_path: Path) -> None:
    objects = np.array([1.0, "x", None], dtype=object)
    refused(states_file(tmp_path / "o", numpy1_pickle(objects)), "dtype('O8'")


@pytest.mark.parametrize(
    "array",
    [np.ones(3, dtype=np.float32), np.ones(3, dtype=np.int64), np.zeros(2, dtype="f8,f8")],
    ids=["float32", "int64", "structured"],
)
def test_other_dtypes_are_refused(tmp_path: Path, array: npt.NDArray[np.generic]) -> None:
    refused(states_file(tmp_path / "d", numpy1_pickle(array)), "not float64")


def test_persistent_id_is_refused(tmp_path: Path) -> None:
    class Storage:
        pass

    class TorchLike(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            if isinstance(obj, Storage):
                return ("storage", "DoubleStorage", "0", "cpu", 79)
            return None

    buffer = io.BytesIO()
    TorchLike(buffer, protocol=2).dump([Storage()])
    refused(states_file(tmp_path / "p", buffer.getvalue()), "persistent id", "torch storage")


def test_admitted_globals_build_nothing_else(tmp_path: Path) -> None:
    cases = {
        # numpy.ndarray called directly: an array of the pickle's chosen size.
        "ndarray": b"\x80\x02cnumpy\nndarray\nJ\x00\x00\x00\x10\x85R.",
        # _codecs.encode with a codec other than latin-1.
        "encode": global_reduce("_codecs", "encode", "x").replace(b"tR", b"Vrot13\ntR"),
        # _reconstruct of another subtype than ndarray.
        "reconstruct": (
            b"\x80\x02cnumpy.core.multiarray\n_reconstruct\ncnumpy\ndtype\nK\x00\x85C\x01b\x87R."
        ),
        # BUILD on an admitted global: would rewrite a plain function's __defaults__.
        "build": b"\x80\x02cnumpy\ndtype\nN}X\x0c\x00\x00\x00__defaults__K\x05\x85s\x86b.",
    }
    for name, data in cases.items():
        refused(states_file(tmp_path / name, data), "refused pickle")
    # Nothing was poisoned: a plain file still loads afterwards.
    assert load_pruned_init(GOAL_FILE).shape == (50, 79)


def test_non_array_results_are_refused(tmp_path: Path) -> None:
    refused(states_file(tmp_path / "l", pickle.dumps([1.0, 2.0], protocol=2)), "list")
    cube = np.zeros((2, 2, 2))
    refused(states_file(tmp_path / "c", numpy1_pickle(cube)), "3-D")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_refused(tmp_path: Path, bad: float) -> None:
    values = np.zeros((2, 3))
    values[1, 2] = bad
    refused(states_file(tmp_path / "f", numpy1_pickle(values)), "non-finite")


# --- the archive around the pickle ----------------------------------------------------


def test_not_a_zip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plain.pruned_init"
    path.write_bytes(numpy1_pickle(np.ones((2, 2))))
    refused(path, "not a zip archive")


def test_missing_file_is_refused(tmp_path: Path) -> None:
    refused(tmp_path / "absent.pruned_init", "unreadable archive")


@pytest.mark.parametrize(
    "names",
    [
        ["archive/data.pkl", "other/data.pkl"],
        ["archive/version"],
        ["data.pkl"],
        ["archive/nested/data.pkl"],
    ],
    ids=["two", "none", "top-level", "nested"],
)
def test_member_layout_is_refused(tmp_path: Path, names: list[str]) -> None:
    data = numpy1_pickle(np.ones((2, 2)))
    path = archive(tmp_path / "layout.pruned_init", dict.fromkeys(names, data))
    error = refused(path, "expected one <top>/data.pkl member")
    assert "unreadable" not in str(error)


def test_duplicate_member_names_are_refused(tmp_path: Path) -> None:
    data = numpy1_pickle(np.ones((2, 2)))
    path = tmp_path / "dup.pruned_init"
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "w") as out:
        out.writestr("archive/data.pkl", data)
        out.writestr("archive/data.pkl", data)
    refused(path, "expected one <top>/data.pkl member")


def test_oversized_member_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A deflated run of zeros: a few kilobytes on disk, over the cap once inflated."""
    oversized = b"\0" * (plus_states.MAX_MEMBER_BYTES + 1)
    path = archive(tmp_path / "big.pruned_init", {"archive/data.pkl": oversized}, deflate=True)
    assert path.stat().st_size < 1024 * 1024
    error = refused(path, "over the", "byte cap")
    assert "unreadable" not in str(error)
