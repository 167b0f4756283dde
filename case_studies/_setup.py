"""What the case studies share: the fast mode switch and a figure folder each."""

import os
from pathlib import Path

import matplotlib.pyplot as plt

FAST = os.environ.get("CROWD_MODELS_FAST", "") == "1"
"""``CROWD_MODELS_FAST=1``: the quick run the tests use."""

HERE = Path(__file__).resolve().parent


def figure_folder(name: str):
    """``case_studies/figures/<name>`` (created) and a ``save(fig, filename)`` that
    writes a PNG there, closes the figure and prints the path."""
    folder = HERE / "figures" / name
    folder.mkdir(parents=True, exist_ok=True)

    def save(fig, filename: str) -> None:
        path = folder / filename
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(f"saved {path.relative_to(HERE.parent)}")

    return folder, save
