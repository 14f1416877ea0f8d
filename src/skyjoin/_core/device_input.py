"""Points already on the GPU: the one conversion at the public boundary.

The rule, for every operator that takes points on the GPU (``self_join``,
``join``, ``DBSCAN.fit``, ``dbscan``, ``dbscan_sweep``):

* **What is device input.**  An object with ``__cuda_array_interface__``
  (CuPy arrays, Numba device arrays, PyTorch CUDA tensors), or with
  ``__dlpack__`` whose ``__dlpack_device__()`` is a CUDA device (DLPack's
  kDLCUDA or kDLCUDAManaged).  Everything else (NumPy arrays, lists,
  data frames, CPU tensors) is host input, left to the host checks
  (``validate.check_points``, scikit-learn's ``validate_data``).
* **The conversion.**  Device input becomes a ``cupy.ndarray`` over the same
  device memory, with no copy through the host: ``cupy.asarray`` for the
  CUDA array interface, ``cupy.from_dlpack`` for DLPack.  Its shape and
  dtype are checked there with the host checks' messages (2-D, at least
  one column, real numbers; bool is read as 0/1; complex and other kinds
  are refused; empty input where the operator refuses it).  Its values
  (NaN, inf) are tested on the GPU by the GPU path (``transfer.to_device``,
  the conditioning's range pass), never on the host.
* **The device.**  Device input runs on the GPU: ``device="auto"`` (and
  None with ``SKYJOIN_DEVICE`` unset or "auto") means the GPU for it, and
  without a usable GPU that is :class:`skyjoin.GPUUnavailableError`, as for
  ``device="gpu"``.  ``device="cpu"`` with device input is a ``TypeError``:
  the points are never copied to the host implicitly (copy them yourself:
  ``cupy.asnumpy(X)``, ``tensor.cpu().numpy()``).
  ``skyjoin._core.device.resolve_device`` applies this with
  ``data_on_gpu=True``.
* **Results.**  Where an operator takes ``on_device=True`` (the join's
  tables and counts, DBSCAN's labels, core indices and components), its
  results stay on the GPU as CuPy arrays; else they come back to the host
  as NumPy arrays, whatever the input.

Cost: O(1) per array (no copy; CuPy is imported only for device input).
"""

from __future__ import annotations

from typing import Any

from .device import cupy, is_device_array
from .device_reduce import all_finite

__all__ = ["on_gpu", "as_device_points", "device_vector_to_host", "DLPACK_CUDA_DEVICES"]

#: DLPack device types of CUDA memory CuPy reads in place: kDLCUDA, kDLCUDAManaged
DLPACK_CUDA_DEVICES = (2, 13)


def _dlpack_on_cuda(x: object) -> bool:
    """Whether x exports DLPack from CUDA memory (a CPU tensor does not).  O(1)."""
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        return False
    return int(x.__dlpack_device__()[0]) in DLPACK_CUDA_DEVICES


def on_gpu(x: object) -> bool:
    """Whether x is device input (the module rule), without importing CuPy.  O(1)."""
    return is_device_array(x) or _dlpack_on_cuda(x)


def _as_cupy(cp, X, name: str):
    """X over the same device memory, as a CuPy array (no copy)."""
    try:
        return cp.asarray(X) if is_device_array(X) else cp.from_dlpack(X)
    except Exception as exc:
        raise TypeError(f"{name} is a GPU array that CuPy cannot read in place: "
                        f"{exc.__class__.__name__}: {exc}") from exc


def as_device_points(X: Any, name: str = "X", allow_empty: bool = True, min_rows: int = 0,
                     check_finite: bool = False):
    """Device input X as a checked (n, d) ``cupy.ndarray`` over the same memory.

    Parameters
    ----------
    X : device input (see the module rule)
    name : str
        The argument's name, for messages.
    allow_empty : bool
        Whether n = 0 is accepted.
    min_rows : int
        Fewest rows accepted (scikit-learn's estimators need 1, and word
        their error as it does).
    check_finite : bool
        Also test for NaN and inf, on the GPU (one reduction, O(n d)), for
        a caller whose GPU path does not.

    Returns
    -------
    cupy.ndarray
        X itself for a CuPy array; a CuPy view of the same device memory
        otherwise.  bool becomes uint8 (one pass on the GPU); every other
        dtype is left as it is, for the GPU path's conversion.

    Raises
    ------
    TypeError
        Values that are not real numbers (complex, other kinds).
    ValueError
        Not 2-D, no columns, empty (where refused), NaN or inf values
        (``check_finite``).
    """
    cp = cupy()
    A = _as_cupy(cp, X, name)
    if A.dtype.kind == "b":
        A = A.astype(cp.uint8)
    if A.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {A.dtype}")
    if A.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D with shape (n_points, n_dims), got {A.ndim}-D "
            f"array of shape {A.shape}"
            + ("; use X.reshape(-1, 1) for one-dimensional data" if A.ndim == 1 else ""))
    if A.shape[1] == 0:
        raise ValueError(f"{name} has no columns (shape {A.shape})")
    if A.shape[0] < min_rows:
        raise ValueError(f"Found array with {A.shape[0]} sample(s) (shape={A.shape}) while a "
                         f"minimum of {min_rows} is required.")
    if A.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} is empty")
    if check_finite and A.dtype.kind == "f":
        # float16 tested in float32 (exact): the reduction's kernels take no float16
        B = A if A.dtype.itemsize >= 4 else A.astype(cp.float32)
        if not all_finite(cp, B):
            raise ValueError(f"{name} contains NaN or inf values; remove or impute them "
                             "first")
    return A


def device_vector_to_host(v: Any, name: str):
    """A vector on the GPU (device input) copied to the host as a NumPy array,
    for the few per-point inputs checked and summed there (DBSCAN's
    ``sample_weight``: 8 bytes a point); anything else returned unchanged.
    O(n) for device input, O(1) otherwise."""
    if not on_gpu(v):
        return v
    cp = cupy()
    return cp.asnumpy(_as_cupy(cp, v, name))
