"""The report folder, the fit file, the figure and the NUTS diagnostics."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from crowd_models.cli._options import (
    ESS_PER_CHAIN,
    REPORT_FILES,
    RHAT_LIMIT,
    InputError,
    _names,
)
from crowd_models.saved import netcdf_attrs  # noqa: F401
from crowd_models.saved import save_fit as _write_fit  # noqa: F401  (the report's fit.nc)


# ------------------------------------------------------------------ output
def _check_out(out: Path, force: bool) -> list[str]:
    """The names in the output folder (empty when it does not exist yet);
    refuses a file, an unwritable place, or a non-empty folder without --force."""
    shown = str(out)
    try:
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {shown!r} is an existing file, not a folder; give a folder "
                             f"for the report (it is created if missing).")
        if out.is_dir():
            entries = sorted(p.name for p in out.iterdir())
            if not os.access(out, os.W_OK | os.X_OK):
                raise InputError(f"--out {shown!r} is not writable (no permission to write in "
                                 f"it); give another folder.")
            if entries and not force:
                raise InputError(f"--out {shown!r} is not empty (it holds {_names(entries)}); "
                                 f"give a new or empty folder, or pass --force to replace the "
                                 f"report's files in it.")
            blocked = [n for n in REPORT_FILES if (out / n).is_dir()]
            if blocked:
                raise InputError(f"--out {shown!r} holds a folder named {blocked[0]!r} where the "
                                 f"report writes a file; move it or give another folder.")
            parent = out.resolve().parent
            if not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"--out {shown!r}: the report is written into a new folder "
                                 f"beside it and then moved into place whole, so its parent "
                                 f"folder {str(parent)!r} must be writable, and it is not; give "
                                 f"a folder in a place you can write to.")
            return entries
        parent = out
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    except OSError as err:
        raise InputError(f"--out {shown!r} cannot be used: {err.strerror or err}.") from None
    if not parent.is_dir():
        raise InputError(f"--out {shown!r} cannot be created: {str(parent)!r} is a file, not a "
                         f"folder.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {shown!r} cannot be created: no permission to write in "
                         f"{str(parent)!r}.")
    return []


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crowd_models")
    except PackageNotFoundError:
        import crowd_models

        return crowd_models.__version__


def _planned_report(out: Path, entries: list[str], names: list[str]) -> None:
    """Say which files of the folder the report replaces (--force) and which
    files of an earlier report go, so that the folder holds one report."""
    replaced = [n for n in names if n in entries]
    stale = [n for n in REPORT_FILES if n in entries and n not in names]
    if replaced:
        print("      --force: replacing " + ", ".join(str(out / n) for n in replaced))
    if stale:
        print("      --force: removing the earlier report's "
              + ", ".join(str(out / n) for n in stale) + " (not part of this report)")


def publish(out: Path, write: Callable[[Path], None]) -> None:
    """Write a report into a new folder beside ``out``, then move it into place whole.

    ``write(folder)`` writes the report's files into ``folder``. Until the last
    step ``out`` is untouched, so an interruption (Ctrl-C) or a failure (a full
    disk) leaves the earlier folder as it was and removes the new one. With
    ``--force`` over a folder, the files in it that are not report files are
    carried into the new folder (hard links, else copies) and
    the two folders are exchanged in one step where the system can (Linux's
    ``renameat2``), else by two renames.
    """
    target = out.resolve()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.writing-", dir=target.parent))
    try:
        write(staging)
        if not target.exists():
            mask = os.umask(0)
            os.umask(mask)
            staging.chmod(0o777 & ~mask)  # as mkdir would have made it
            os.rename(staging, target)
            return
        for name in sorted(os.listdir(target)):
            if name not in REPORT_FILES:
                _carry(target / name, staging / name)
        shutil.copymode(target, staging)
        shutil.rmtree(_swap(staging, target), ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # after the swap: the earlier folder
        raise


def publish_file(out: Path, write: Callable[[Path], None]) -> None:
    """Write one file beside ``out`` and move it into place whole (the one-file
    :func:`publish`): ``out`` is the earlier file, or the new one complete,
    never a part; a failure removes the new file."""
    target = out.resolve()
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.writing-", dir=target.parent)
    os.close(fd)
    staging = Path(name)
    try:
        write(staging)
        mask = os.umask(0)
        os.umask(mask)
        staging.chmod(0o666 & ~mask)  # as open() would have made it
        os.replace(staging, target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _carry(src: Path, dst: Path) -> None:
    """A user's file, link or folder, into the new report folder."""
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(src, dst)


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _swap(new: Path, target: Path) -> Path:
    """Put the folder ``new`` at ``target``; returns where the replaced folder is."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None and renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD,
                                           os.fsencode(target), _RENAME_EXCHANGE) == 0:
        return new
    old = target.with_name(f".{target.name}.replaced-{os.getpid()}")
    os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(old, target)
        raise
    return old


# ---------------------------------------------------------------- reports
def write_csv(table: pd.DataFrame, path) -> None:
    """``table.to_csv(path)``: the same cells as pandas writes, through pyarrow's CSV
    writer where the table allows (flat, distinct column names; numbers, booleans and
    text without a separator, quote or line break), pandas' own writer otherwise.

    pandas formats each float in Python (2.2 s for the 200,000-item table of a
    2·10^6-label crowd; here 0.2 s). pyarrow writes a float in its shortest
    exact form as pandas does, but an integral one without ``.0`` (which reads
    back as an integer column) and every text in quotes: both are put back, so the
    file reads back with pandas' dtypes and values; a missing value is an empty
    cell either way.
    """
    arrow = _arrow_table(table)
    if arrow is not None:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        try:  # unquoted, as pandas writes cells without a separator, quote or line break
            pcsv.write_csv(arrow, path, pcsv.WriteOptions(quoting_style="none",
                                                          quoting_header="none"))
            return
        except pa.ArrowInvalid:  # a cell needs quotes, and pyarrow would quote every text
            pass
    table.to_csv(path)


def _arrow_table(table: pd.DataFrame):
    """The index and columns of ``table`` as a pyarrow Table of the cells pandas
    writes, or None where pyarrow is missing or a name or dtype is beyond it."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:
        return None
    names = [table.index.name or "", *table.columns]
    if (table.index.nlevels > 1 or table.columns.nlevels > 1
            or not all(isinstance(n, str) for n in names) or len(set(names)) < len(names)):
        return None
    columns = []
    for col in (pd.Series(table.index), *(table.iloc[:, j] for j in range(table.shape[1]))):
        kind = col.dtype.kind if isinstance(col.dtype, np.dtype) else None
        if kind in ("i", "u"):
            columns.append(pa.array(col.to_numpy()))
        elif kind == "f":
            values = col.to_numpy()
            numbers = pa.array(values, from_pandas=True)  # NaN as a missing value
            with np.errstate(invalid="ignore"):
                whole = np.isfinite(values) & (values == np.round(values))
            if whole.any():  # 1.0 as '1.0', not '1' (1e+22 stays)
                text = pc.cast(numbers, pa.string())
                numbers = pc.if_else(pc.match_substring_regex(text, r"^-?[0-9]+$"),
                                     pc.binary_join_element_wise(text, ".0", ""), text)
            columns.append(numbers)
        elif isinstance(col.dtype, pd.StringDtype):
            columns.append(pa.array(col, from_pandas=True))
        elif kind in ("b", "O") or isinstance(col.dtype, pd.CategoricalDtype):
            values = col.to_numpy(dtype=object)
            text = values.astype(str).astype(object)  # str(value), as pandas writes it
            text[pd.isna(values)] = None
            columns.append(pa.array(text, type=pa.string()))
        else:  # dates, intervals, nullable extension types: pandas' own formatting
            return None
    return pa.table(columns, names=names)


def _continuous_scores(table: pd.DataFrame) -> str | None:
    """Correlation and RMSE of the true-value means against gold, where known."""
    if "gold" not in table:
        return None
    known = table["gold"].notna()
    if known.sum() < 2:
        return None
    mean, gold = table.loc[known, "mean"], table.loc[known, "gold"]
    corr = float(np.corrcoef(mean, gold)[0, 1])
    rmse = float(np.sqrt(np.mean((mean - gold) ** 2)))
    return f"against gold ({int(known.sum())} items): correlation {corr:.4f}, RMSE {rmse:.4g}"


def _choose_penalty(ann, penalties: list[float]) -> float:
    """The single rate, or the one the gold-free 5-fold disagreement score picks."""
    if len(penalties) == 1:
        return penalties[0]
    from crowd_models.selection import select_penalty

    print(f"      scoring {len(penalties)} penalties by 5-fold disagreement (no gold; "
          f"EM with 5 restarts per fold) ...", flush=True)
    try:
        chosen = select_penalty(ann, penalties, rng=0, n_restarts=5)
    except ValueError as err:
        raise InputError(str(err)) from None
    for line in chosen.scores.round(4).to_string().splitlines():
        print("      " + line)
    print(f"      chosen penalty: {chosen.penalty:g}")
    return chosen.penalty


def _annotator_figure(fit, table):
    """The family's annotator figure (``annotators.png``), or None with the reason below.

    two-coin: ROC space, best and worst annotators by weight named, markers sized
    by labels; ordinal cumulative: one ROC panel per threshold; Dawid-Skene,
    one-coin and ordinal latent: the pooled confusion then the worst and the most
    uncertain annotators' (titled by group); continuous: bias against noise SD
    with the table's intervals (EM's conditional ones where the table has them);
    feature-accuracy: accuracy against labels, with its spread over the items.
    """
    import matplotlib

    matplotlib.use("Agg")
    from crowd_models import report
    from crowd_models._fits import posterior_of

    post = posterior_of(fit)
    if "sensitivity" in post and "threshold" in post["sensitivity"].dims:
        return report.plot_thresholds(fit, label_extremes=1)
    if "sensitivity" in post:
        return report.plot_annotators(fit, label_extremes=3).figure
    if "confusion" in post:
        recorded = "n_labels" in table and bool(table["n_labels"].notna().all())
        return report.plot_confusion_groups(fit, n=2, table=table,
                                            population=recorded or "confusion_mean" in post)
    if "precision" in post and "true_value" in post:
        return report.plot_bias_noise(fit, table=table, label_extremes=2).figure
    if "accuracy_mean" in table:  # feature-accuracy: the family's own table has it
        return report.plot_accuracy(fit, table=table, label_extremes=2).figure
    # stacked Gaussian fits (not on the command line) have no annotator-quality
    # parameter to plot: each annotator's base learner is a class-conditional
    # Gaussian model, and the stacking weights come from annotator_weights,
    # outside the fit; any other fit has nothing we know how to draw either
    return None


def nuts_diagnostics(fit) -> dict:
    """ArviZ's convergence checks of a NUTS fit: the largest r-hat and the
    smallest bulk ESS over every posterior variable (constant ones, whose
    r-hat is undefined, are skipped), with the variables they belong to, the
    number of divergent transitions and the label-switched chains that
    :func:`crowd_models.sample` flagged (None when it did not check, e.g. for
    continuous labels)."""
    import arviz as az

    from crowd_models._fits import posterior_of

    post = posterior_of(fit)
    keep = [n for n in post.data_vars if {"chain", "draw"} <= set(post[n].dims)
            and np.issubdtype(post[n].dtype, np.number)]
    post = post[keep]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # constant variables: 0 / 0
        rhat = az.rhat(post)
        ess = az.ess(post, method="bulk")

    def extreme(ds, largest: bool):
        best = (np.nan, "")
        for name in ds.data_vars:
            values = np.asarray(ds[name].values, dtype=float).ravel()
            # where r-hat is undefined the draws are constant: no ESS either
            values = values[np.isfinite(values) & np.isfinite(
                np.asarray(rhat[name].values, dtype=float).ravel())]
            if values.size:
                value = values.max() if largest else values.min()
                if np.isnan(best[0]) or (value > best[0] if largest else value < best[0]):
                    best = (float(value), str(name))
        return best

    max_rhat, rhat_var = extreme(rhat, True)
    min_ess, ess_var = extreme(ess, False)
    divergences = None
    if "sample_stats" in fit.children and "diverging" in fit["sample_stats"].to_dataset():
        divergences = int(np.asarray(fit["sample_stats"]["diverging"].values).sum())
    switched = fit.attrs.get("label_switched_chains")
    if switched is not None:
        switched = [int(c) for c in np.atleast_1d(switched)]
    return {"max_rhat": max_rhat, "max_rhat_variable": rhat_var, "min_ess_bulk": min_ess,
            "min_ess_bulk_variable": ess_var, "divergences": divergences,
            "label_switched_chains": switched, "chains": int(post.sizes.get("chain", 1))}


def _print_diagnostics(diag: dict) -> None:
    switched = diag["label_switched_chains"]
    parts = [f"max r-hat {diag['max_rhat']:.3f} ({diag['max_rhat_variable']})",
             f"min bulk ESS {diag['min_ess_bulk']:.0f} ({diag['min_ess_bulk_variable']})"]
    if diag["divergences"] is not None:
        parts.append(f"{diag['divergences']} divergences")
    if switched is not None:
        parts.append(f"label-switched chains: {switched if switched else 'none'}")
    print("NUTS: " + ", ".join(parts))
    warn = []
    if diag["max_rhat"] > RHAT_LIMIT:
        warn.append(f"max r-hat {diag['max_rhat']:.3f} > {RHAT_LIMIT} "
                    f"({diag['max_rhat_variable']}): the chains disagree; run longer (--tune, "
                    f"--draws) and check the label-switched chains.")
    floor = ESS_PER_CHAIN * diag["chains"]
    if diag["min_ess_bulk"] < floor:
        warn.append(f"min bulk ESS {diag['min_ess_bulk']:.0f} < {floor} ({ESS_PER_CHAIN} per "
                    f"chain, {diag['min_ess_bulk_variable']}): too few effective draws for "
                    f"reliable means and intervals; raise --draws.")
    if diag["divergences"]:
        warn.append(f"{diag['divergences']} divergent transitions: NUTS could not follow the "
                    f"posterior everywhere, so the draws may be biased.")
    for line in warn:
        print(f"warning: {line}", file=sys.stderr, flush=True)


def _diagnostic_attrs(diag: dict) -> dict:
    out = {"max_rhat": diag["max_rhat"], "min_ess_bulk": diag["min_ess_bulk"]}
    if diag["divergences"] is not None:
        out["divergences"] = diag["divergences"]
    if diag["label_switched_chains"] is not None:
        out["label_switched_chains"] = diag["label_switched_chains"]
    return out
