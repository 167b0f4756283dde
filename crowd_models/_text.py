"""Ground floor for messages: values shown briefly, so that an error about
thousands of ids stays one readable line, and warnings that name the user's line."""

from __future__ import annotations

import os
import warnings

import numpy as np

_SKIP = (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
"""Frames in this folder (the crowd_models package) are skipped when a warning
names the line that caused it: the warning points at the user's call, however
deep in the package it was raised."""


def warn(message: str) -> None:
    """A UserWarning attributed to the first caller outside crowd_models."""
    warnings.warn(message, UserWarning, skip_file_prefixes=_SKIP)

REPR_WIDTH = 40
"""An example value longer than this (as repr) is cut in messages."""


def short_repr(value) -> str:
    """``repr`` of a value (a NumPy scalar as its Python value), cut at ``REPR_WIDTH``."""
    if isinstance(value, np.generic):
        value = value.item()  # 5, not np.int64(5)
    text = repr(value)
    return text if len(text) <= REPR_WIDTH else text[: REPR_WIDTH - 3] + "..."


def examples(values, n: int = 5) -> str:
    """At most ``n`` values, each cut to ``REPR_WIDTH`` characters, and the count."""
    values = list(values)
    shown = ", ".join(short_repr(v) for v in values[:n])
    return shown + (f", ... ({len(values)} in all)" if len(values) > n else "")


def listing(values, n: int = 10) -> str:
    """``[a, b, c]``, or ``[a, b, ...] (347 in all)`` past ``n`` values."""
    values = list(values)
    shown = ", ".join(short_repr(v) for v in values[:n])
    if len(values) <= n:
        return f"[{shown}]"
    return f"[{shown}, ...] ({len(values)} in all)"
