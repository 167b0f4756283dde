"""What the case studies share: the fast mode switch and a figure folder each."""

import os
import sys
from pathlib import Path

import matplotlib.pyplot as plt

FAST = os.environ.get("CROWD_MODELS_FAST", "") == "1"
"""``CROWD_MODELS_FAST=1``: the quick run the tests use."""

HERE = Path(__file__).resolve().parent


def in_notebook() -> bool:
    """Whether the code runs in a Jupyter kernel (the docs build, or a reader's
    notebook) rather than as a script."""
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def figure_folder(name: str):
    """``<this folder>/figures/<name>`` (created) and a ``save(fig, filename)`` that
    writes a PNG there, shows it inline in a notebook, closes the figure and prints
    the path."""
    folder = HERE / "figures" / name
    folder.mkdir(parents=True, exist_ok=True)

    def save(fig, filename: str) -> None:
        path = folder / filename
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        if in_notebook():
            from IPython.display import Image, display

            display(Image(filename=str(path)))
        print(f"saved {path.relative_to(HERE.parent)}")

    return folder, save
