"""Input checks of :mod:`geval_spec.analysis.ppi`: levels, minimum label counts and the three score arrays.

Every problem is a ``ValueError`` naming the input, so a caller can pass
user data straight in. numpy and the standard library only.
"""

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["check_min_labels", "checked_level", "validated"]


def checked_level(level: float) -> float:
    """``level`` as a float strictly between 0 and 1."""
    try:
        value = float(level)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}") from exc
    if not 0 < value < 1:
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return value


def check_min_labels(min_labels: int) -> None:
    """``min_labels`` must be an integer of at least 2 (a variance needs two values)."""
    if isinstance(min_labels, bool) or not isinstance(min_labels, (int, np.integer)) or min_labels < 2:
        raise ValueError(f"min_labels must be an integer >= 2, got {min_labels!r}")


def validated(
    y_labelled: ArrayLike, f_labelled: ArrayLike, f_unlabelled: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The three inputs as 1-D float arrays; ``ValueError`` naming the first problem found."""
    arrays = []
    for name, values in (("y_labelled", y_labelled), ("f_labelled", f_labelled), ("f_unlabelled", f_unlabelled)):
        try:
            array = np.asarray(values, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be a sequence of numbers: {exc}") from exc
        if array.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
        finite = np.isfinite(array)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            raise ValueError(
                f"{name} has {bad.size} non-finite value(s) (NaN or infinity), the first at index {int(bad[0])}"
            )
        arrays.append(array)
    y, f_l, f_u = arrays
    if y.size != f_l.size:
        raise ValueError(
            f"y_labelled and f_labelled must pair up case by case, got lengths {y.size} and {f_l.size}"
        )
    if y.size + f_u.size == 0:
        raise ValueError("no cases: y_labelled, f_labelled and f_unlabelled are all empty")
    return y, f_l, f_u
