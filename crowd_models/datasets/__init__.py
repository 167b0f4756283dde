"""Loaders for the real annotation data bundled with the package.

Each loader returns :class:`~crowd_models.Annotations` (``load_music_genre``
with ``split="test"`` returns held-out features and gold instead). The files
are kept exactly as published; their provenance (source, citation, licence,
columns, counts) is in ``crowd_models/datasets/data/README.md``.

Majority-vote accuracies quoted below are ``majority_vote(ann, hard=True,
ties="first")`` (ties go to the class listed first) against the gold labels,
over the items that have gold.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd
import yaml

from crowd_models.data import Annotations

__all__ = [
    "load_rte",
    "load_bluebirds",
    "load_anesthesia",
    "load_dog",
    "load_web_search",
    "load_music_genre",
    "load_affect",
    "load_gi_lesions",
    "load_gi_lesions_split",
    "load_sentiment",
    "load_adult_content",
    "load_relevance",
    "load_mozafari",
    "load_duchenne",
    "load_wsd",
    "AFFECT_EMOTIONS",
    "DATASETS",
]

MUSIC_GENRE_SPLITS = ("train", "test")
AFFECT_EMOTIONS = ("anger", "disgust", "fear", "joy", "sadness", "surprise", "valence")
"""The seven affect dimensions of :func:`load_affect`."""
_MUSIC_FEATURES = [f"feature{j}" for j in range(124)]


def _path(*parts):
    return resources.files("crowd_models.datasets").joinpath("data", *parts)


def _read(*parts, **kwargs) -> pd.DataFrame:
    with _path(*parts).open("rb") as fh:
        return pd.read_csv(fh, **kwargs)


def _item_truth(truth: pd.DataFrame, what: str) -> pd.Series:
    """One gold label per item from an ``item truth`` table that may repeat items.

    Raises if an item is given two different truths.
    """
    per_item = truth.groupby("item", sort=False)["truth"]
    conflicting = per_item.nunique()
    conflicting = conflicting[conflicting > 1]
    if len(conflicting):
        raise ValueError(
            f"{what}: {len(conflicting)} item(s) have more than one truth label, e.g. items "
            f"{list(conflicting.index[:5])}; the bundled file is inconsistent."
        )
    return per_item.first()


def load_rte() -> Annotations:
    """Recognizing Textual Entailment crowd labels (Snow et al., EMNLP 2008).

    800 items, 164 annotators, 10 labels per item (8000 labels), classes
    [0, 1] (1 = the text entails the hypothesis), gold for every item (400 of
    each class). Majority vote reaches 0.92 accuracy (0.9187) with 5-5 ties
    (65 items) going to class 0, 0.90 when ties count as half right. Annotator
    ids are the Mechanical Turk worker ids.

    Examples
    --------
    >>> ann = cm.datasets.load_rte()
    >>> ann.n_items, ann.n_annotators, ann.has_gold
    """
    with _path("rte", "rte.standardized.tsv").open("r") as fh:
        df = pd.read_csv(fh, sep="\t")
    gold = df.groupby("orig_id", sort=False)["gold"].first()
    return Annotations.from_frame(
        df, item="orig_id", annotator="!amt_worker_ids", label="response",
        classes=[0, 1], gold=gold,
    )


def load_bluebirds() -> Annotations:
    """Bluebird species labels (Welinder et al., NeurIPS 2010).

    108 images, 39 annotators, every annotator labels every image (4212
    labels), classes [False, True], gold for every image (60 false, 48 true).
    Majority vote reaches 0.76 accuracy (0.7593; 39 voters, so no ties).

    Examples
    --------
    >>> ann = cm.datasets.load_bluebirds()
    """
    with _path("bluebirds", "labels.yaml").open("r") as fh:
        labels = yaml.safe_load(fh)
    with _path("bluebirds", "gt.yaml").open("r") as fh:
        gold = yaml.safe_load(fh)
    rows = [(item, worker, bool(value))
            for worker, by_item in labels.items() for item, value in by_item.items()]
    df = pd.DataFrame(rows, columns=["item", "annotator", "label"])
    return Annotations.from_frame(
        df, classes=[False, True], gold=pd.Series(gold).astype(bool),
    )


def load_anesthesia() -> Annotations:
    """Anaesthetists' ratings of patients (Dawid & Skene, 1979).

    A. P. Dawid and A. M. Skene (1979), "Maximum likelihood estimation of
    observer error-rates using the EM algorithm", Applied Statistics 28(1),
    20-28. File taken from the R package rater (GPL-2).

    45 patients (items 1..45), 5 anaesthetists (annotators 1..5), 315 labels.
    Rater 1 rated every patient three times: all three ratings are kept as
    separate annotations (rater 1 has 135 labels, raters 2-5 have 45 each), so
    majority vote and the likelihood count them three times. Classes
    [1, 2, 3, 4], in this order; they are ordered levels of the patient's
    fitness for anaesthesia (the codes are ascending, so the class order is
    already the level order that an ordinal model needs). No gold, so no
    majority-vote accuracy.

    There is deliberately no ``ordered=`` argument: :class:`Annotations` does
    not record whether classes are ordered, so the flag would change nothing.

    Examples
    --------
    >>> ann = cm.datasets.load_anesthesia()
    >>> list(ann.classes)
    """
    df = _read("anesthesia", "anesthesia.csv")
    return Annotations.from_frame(
        df, item="item", annotator="rater", label="rating", classes=[1, 2, 3, 4],
        duplicates="keep",  # rater 1's three ratings of each patient, by design
    )


def load_dog() -> Annotations:
    """ImageNet dog-breed labels (Zhou, Platt, Basu & Mao, NeurIPS 2012).

    D. Zhou, J. C. Platt, S. Basu and Y. Mao (2012), "Learning from the Wisdom
    of Crowds by Minimax Entropy", NeurIPS 25, 2204-2212 (section 6.2).

    807 images (items 1..807), 109 workers, 10 labels per image (8070 labels,
    no worker labels an image twice), classes [0, 1, 2, 3] (four breeds; the
    files do not name them). Gold for every image: 172 / 185 / 218 / 232 of
    classes 0 / 1 / 2 / 3. Majority vote reaches 0.82 accuracy (0.8178;
    0.8222 when the 50 tied items count as split).

    The truth file repeats each item's gold once per label row; it is reduced
    to one label per item, and a ``ValueError`` is raised if an item's
    repeated truths disagree.

    Examples
    --------
    >>> ann = cm.datasets.load_dog()
    """
    df = _read("dog", "dogs-1.merged.label.tsv", sep="\t", header=None,
               names=["item", "worker", "label"])
    truth = _read("dog", "dogs-1.merged.truth.tsv", sep="\t", header=None,
                  names=["item", "truth"])
    gold = _item_truth(truth, "dog/dogs-1.merged.truth.tsv")
    return Annotations.from_frame(
        df, item="item", annotator="worker", label="label", classes=[0, 1, 2, 3], gold=gold,
    )


def load_web_search() -> Annotations:
    """Web-search relevance judgements (Zhou, Platt, Basu & Mao, NeurIPS 2012).

    D. Zhou, J. C. Platt, S. Basu and Y. Mao (2012), "Learning from the Wisdom
    of Crowds by Minimax Entropy", NeurIPS 25, 2204-2212.

    2665 query-URL pairs (items 1..2665), 177 workers, 15567 labels (1 to 12
    per item, no worker labels an item twice). Classes [1, 2, 3, 4, 5]: five
    ordered relevance levels in code order; the files do not say which end is
    the most relevant. Partial gold: 2653 items have a truth label (330 / 481
    / 689 / 534 / 619 of levels 1..5); the other 12 items have gold -1.
    Majority vote reaches 0.78 accuracy (0.7765) on the 2653 items with gold,
    ties going to the lower level (0.73 when the 569 tied items count as split).

    Examples
    --------
    >>> ann = cm.datasets.load_web_search()
    """
    df = _read("web_search", "web_crowd.txt", sep="\t", header=None,
               names=["item", "worker", "label"])
    truth = _read("web_search", "web_truth.txt", sep="\t", header=None,
                  names=["item", "truth"])
    gold = _item_truth(truth, "web_search/web_truth.txt")
    return Annotations.from_frame(
        df, item="item", annotator="worker", label="label", classes=[1, 2, 3, 4, 5],
        gold=gold,
    )


def _music_table(name: str) -> pd.DataFrame:
    """A music_genre feature table: features and ``class``, indexed by song id."""
    table = _read("music_genre", name)
    if list(table.columns) != ["id", *_MUSIC_FEATURES, "class"]:
        raise ValueError(
            f"music_genre/{name}: expected columns id, feature0..feature123, class; got "
            f"{list(table.columns[:3])} ... {list(table.columns[-2:])} "
            f"({len(table.columns)} in all)."
        )
    table["id"] = table["id"].str.strip()
    table["class"] = table["class"].str.strip()
    dup = table["id"][table["id"].duplicated()]
    if len(dup):
        raise ValueError(f"music_genre/{name}: duplicate song ids {list(dup.unique()[:5])}.")
    return table.set_index("id")


def load_music_genre(split: str = "train"):
    """Music-genre labels with audio features (Rodrigues, Pereira & Ribeiro, 2013).

    F. Rodrigues, F. Pereira and B. Ribeiro (2013), "Learning from multiple
    annotators: distinguishing good from random labelers", Pattern Recognition
    Letters 34(12), 1428-1436. 30-second GTZAN songs, 124 Marsyas audio
    features (``feature0`` .. ``feature123``).

    Classes, sorted: ['blues', 'classical', 'country', 'disco', 'hiphop',
    'jazz', 'metal', 'pop', 'reggae', 'rock'].

    Song ids are the GTZAN file names (``"blues.00012.mp3"``). The crowd
    file's song ids must all have a feature row: a ``ValueError`` names any
    that do not, rather than dropping their labels.

    Parameters
    ----------
    split : {"train", "test"}
        ``"train"``: :class:`Annotations` for 700 songs, 44 Mechanical Turk
        workers, 2945 labels (1 to 7 per song, no worker labels a song twice),
        with the 124 features of every song and gold for every song (63 to 75
        songs per genre). Majority vote reaches 0.71 accuracy (0.7114;
        0.70 when the 188 tied songs count as split).
        ``"test"``: the 300 held-out songs (no crowd labels), as a tuple
        ``(features, gold)``: a DataFrame (300, 124) indexed by song id and a
        Series of genre names with the same index.

    Examples
    --------
    >>> train = cm.datasets.load_music_genre("train")
    """
    if split not in MUSIC_GENRE_SPLITS:
        raise ValueError(
            f"split={split!r} is not a music_genre split; choose one of "
            f"{', '.join(repr(s) for s in MUSIC_GENRE_SPLITS)}."
        )
    if split == "test":
        table = _music_table("music_genre_test.csv")
        return table[_MUSIC_FEATURES], table["class"]

    table = _music_table("music_genre_gold.csv")
    answers = _read("music_genre", "mturk_answers.csv")
    for col in ("WorkerID", "Input.song", "Input.true_label", "Answer.pred_label"):
        answers[col] = answers[col].str.strip()
    unmatched = pd.unique(answers.loc[~answers["Input.song"].isin(table.index), "Input.song"])
    if len(unmatched):
        raise ValueError(
            f"music_genre: {len(unmatched)} labelled song(s) have no feature row in "
            f"music_genre_gold.csv, e.g. {list(unmatched[:5])}."
        )
    gold = table["class"]
    genres = sorted(gold.unique())
    used = set(answers["Answer.pred_label"])
    if used != set(genres) or len(genres) != 10:
        raise ValueError(
            f"music_genre: the workers' labels {sorted(used)} and the gold genres {genres} "
            f"should be the same 10 genres."
        )
    disagree = answers["Input.true_label"] != answers["Input.song"].map(gold)
    if disagree.any():
        raise ValueError(
            f"music_genre: Input.true_label in mturk_answers.csv differs from the gold class "
            f"in music_genre_gold.csv on {int(disagree.sum())} row(s)."
        )
    return Annotations.from_frame(
        answers, item="Input.song", annotator="WorkerID", label="Answer.pred_label",
        classes=genres, features=table[_MUSIC_FEATURES], gold=gold,
    )


def load_affect(emotion: str) -> Annotations:
    """Affect ratings of news headlines (Snow, O'Connor, Jurafsky & Ng, EMNLP 2008).

    R. Snow, B. O'Connor, D. Jurafsky and A. Y. Ng (2008), "Cheap and Fast —
    But is it Good? Evaluating Non-Expert Annotations for Natural Language
    Tasks", EMNLP 2008. Mechanical Turk workers rated 100 headlines of the
    SemEval-2007 Affective Text task on seven dimensions.

    Parameters
    ----------
    emotion : one of :data:`AFFECT_EMOTIONS`
        ``"anger"``, ``"disgust"``, ``"fear"``, ``"joy"``, ``"sadness"``,
        ``"surprise"`` (ratings 0..100) or ``"valence"`` (-100..100).

    Returns
    -------
    Annotations
        Continuous labels: 100 items (headline ids 500..599, in file order of
        first appearance), 38 annotators (Mechanical Turk worker ids; the same
        workers in all seven sets), 10 labels per item (1000 labels, no worker
        rates an item twice; 20 to 100 labels per worker), and the expert
        score of every item as ``gold`` (the file's ``gold`` column). The
        headline texts are bundled in ``data/affect/affect_headlines.tsv``
        (``id``, ``headline``; join on the item id).

    Examples
    --------
    >>> ann = cm.datasets.load_affect("anger")
    >>> ann.continuous
    """
    if emotion not in AFFECT_EMOTIONS:
        raise ValueError(
            f"emotion={emotion!r} is not an affect data set; choose one of "
            f"{', '.join(repr(e) for e in AFFECT_EMOTIONS)}."
        )
    df = _read("affect", f"{emotion}.standardized.tsv", sep="\t")
    per_item = df.groupby("orig_id", sort=False)["gold"]
    conflicting = per_item.nunique()
    conflicting = conflicting[conflicting > 1]
    if len(conflicting):
        raise ValueError(
            f"affect/{emotion}.standardized.tsv: {len(conflicting)} item(s) have more than one "
            f"gold value, e.g. items {list(conflicting.index[:5])}; the bundled file is "
            f"inconsistent."
        )
    return Annotations.from_frame(
        df, item="orig_id", annotator="!amt_worker_ids", label="response",
        gold=per_item.first().astype(float), continuous=True,
    )


GI_TASKS = {"3class": "gi_lesions_3class_labels.csv",
            "binary": "gi_lesions_binary_resection_labels.csv"}
GI_LIGHTS = ("white", "nbi", "paper")
GI_FEATURE_SETS = ("all", "paper")
GI_PAPER_FEATURES = (112, 172, 474, 488, 602)
"""The five features (1-based numbers) that Montani & Cappozzo use."""
GI_SPLIT_RUNS = ("table7", "table6")
_GI_SPLIT_CODES = {1: "adenoma", 2: "hyperplasic", 3: "serrated"}   # paper_splits_50 files
_GI_BINARY = {"adenoma": "resection", "serrated": "resection", "hyperplasic": "no-resection"}


def _choice(value, options, what: str):
    if value not in options:
        raise ValueError(
            f"{what}={value!r} is not valid; choose one of "
            f"{', '.join(repr(o) for o in options)}."
        )


def _gi_features(light: str) -> pd.DataFrame:
    """The 698 features of each lesion's image under ``light``, indexed by lesion."""
    raw = _read("gi_lesions", "data.txt", header=None).T
    names = raw[0].astype(str)
    if len(raw.columns) != 701 or names.value_counts().ne(2).any():
        raise ValueError("gi_lesions/data.txt: expected 701 rows and two columns per lesion.")
    light_code = raw[2].astype(int)
    if light == "paper":
        keep = ~names.duplicated(keep="first")
    else:
        keep = light_code == (1 if light == "white" else 2)
    features = raw.loc[keep, 3:].astype(float)
    features.index = names[keep].to_numpy()
    features.index.name = "lesion"
    features.columns = [f"feature{j}" for j in range(1, 699)]
    if not features.index.is_unique or len(features) != 76:
        raise ValueError(f"gi_lesions/data.txt: {light!r} light does not give one image per "
                         f"lesion for all 76 lesions.")
    return features


def _gi_annotations(table: pd.DataFrame, classes, features: pd.DataFrame | None) -> Annotations:
    annotators = [c for c in table.columns if c not in ("lesion", "ground_truth")]
    long = table.melt(id_vars="lesion", value_vars=annotators, var_name="annotator",
                      value_name="label")
    return Annotations.from_frame(
        long, item="lesion", annotator="annotator", label="label", classes=classes,
        features=features, gold=table.set_index("lesion")["ground_truth"],
    )


def load_gi_lesions(task: str = "3class", features: str | None = "all",
                    light: str = "white") -> Annotations:
    """Gastrointestinal lesions in colonoscopy videos (Mesejo et al., IEEE TMI 2016).

    P. Mesejo, D. Pizarro, A. Abergel, O. Rouquette, S. Beorchia, L. Poincloux
    and A. Bartoli (2016), "Computer-Aided Classification of Gastrointestinal
    Lesions in Regular Colonoscopy", IEEE Transactions on Medical Imaging
    35(9), 2051-2063 (UCI data set 408); used by Montani & Cappozzo,
    "Stacking model-based classifiers for dealing with multiple sets of noisy
    labels".

    76 lesions (items, named like ``"adenoma_8"``), each labelled once by 7
    clinicians (``expert_1`` .. ``expert_4``, ``beginner_1`` .. ``beginner_3``),
    532 labels, gold for every lesion.

    Parameters
    ----------
    task : {"3class", "binary"}
        ``"3class"``: classes ``adenoma`` (40 lesions), ``hyperplasic`` (21),
        ``serrated`` (15). ``"binary"``: ``no-resection`` (the 21 hyperplasic
        lesions) vs ``resection`` (55).
    features : {"all", "paper"} or None
        ``"all"``: the 698 image features ``feature1`` .. ``feature698``;
        ``"paper"``: the five used in the stacking paper
        (:data:`GI_PAPER_FEATURES`); None: no features.
    light : {"white", "nbi", "paper"}
        Which of the lesion's two images the features come from: white light,
        narrow-band imaging, or (``"paper"``) the first column of each lesion
        in ``data.txt`` — 61 white-light and 15 NBI images, as in the paper.

    Examples
    --------
    >>> ann = cm.datasets.load_gi_lesions(task="3class")
    """
    _choice(task, tuple(GI_TASKS), "task")
    _choice(light, GI_LIGHTS, "light")
    if features is not None:
        _choice(features, GI_FEATURE_SETS, "features")
    table = _read("gi_lesions", GI_TASKS[task])
    classes = (["adenoma", "hyperplasic", "serrated"] if task == "3class"
               else ["no-resection", "resection"])
    x = None
    if features is not None:
        x = _gi_features(light)
        if features == "paper":
            x = x[[f"feature{j}" for j in GI_PAPER_FEATURES]]
    return _gi_annotations(table, classes, x)


def load_gi_lesions_split(k: int, task: str = "3class", run: str = "table7") -> dict:
    """One of the stacking paper's 50 stratified train/test splits of the lesions.

    Montani & Cappozzo's splits: 50 training and 26 test lesions, with the
    five paper features taken from the first column of each lesion
    (``light="paper"``). Their real-data script seeds R once and draws, per
    split, the split and then PGT's gold subset, so its two runs use
    different splits after the first:

    * ``run="table7"``: the authors' ``paper_splits_50`` files, the splits of
      their Table 7 run (and of their Julia competitors). The files carry no
      lesion names; rows are matched to lesions by their feature values, and
      the split's clinician labels and gold are checked against the label
      tables.
    * ``run="table6"``: the splits of their Table 6 run, regenerated with R
      (``paper_splits_table6.csv``, made by ``make_table6_splits.R``, which
      also regenerates every ``paper_splits_50`` split exactly), with the five
      training lesions whose gold PGT saw.

    Returns
    -------
    dict
        ``train``: :class:`Annotations` of the 50 training lesions (7
        clinicians' labels, the five features, gold); ``test_features``:
        DataFrame (26, 5) indexed by lesion; ``test_gold``: Series of class
        names with the same index; ``pgt_gold``: the lesions whose gold PGT
        used (``run="table6"``; None for ``"table7"``, which drew none).
        ``task="binary"`` maps the classes to resection / no-resection.

    Examples
    --------
    >>> split = cm.datasets.load_gi_lesions_split(1)
    >>> split["train"]
    """
    if isinstance(k, bool) or not isinstance(k, (int,)) or not 1 <= k <= 50:
        raise ValueError(f"k={k!r}: the paper's splits are numbered 1..50.")
    _choice(task, tuple(GI_TASKS), "task")
    _choice(run, GI_SPLIT_RUNS, "run")
    x = _gi_features("paper")[[f"feature{j}" for j in GI_PAPER_FEATURES]]
    table = _read("gi_lesions", GI_TASKS["3class"]).set_index("lesion")
    if task == "binary":
        classes = ["no-resection", "resection"]
    else:
        classes = ["adenoma", "hyperplasic", "serrated"]
    pgt_gold = None
    if run == "table6":
        rows = _read("gi_lesions", "paper_splits_table6.csv")
        rows = rows[rows["split"] == k]
        train = pd.Index(rows.loc[rows["set"] == "train", "lesion"], name="lesion")
        test = pd.Index(rows.loc[rows["set"] == "test", "lesion"], name="lesion")
        pgt_gold = pd.Index(rows.loc[rows["pgt_gold"], "lesion"], name="lesion")
        return _gi_split(table, task, classes, x, train, test, pgt_gold)

    def lesions(name):
        rows = _read("gi_lesions", "paper_splits_50", f"{k}X_{name}.csv", header=None)
        close = np.isclose(rows.to_numpy()[:, None, :], x.to_numpy()[None, :, :],
                           rtol=1e-4, atol=0).all(axis=2)
        if not (close.sum(axis=1) == 1).all():
            raise ValueError(f"gi_lesions split {k} ({name}): rows do not match the lesions' "
                             f"features one to one.")
        return x.index[close.argmax(axis=1)]

    train, test = lesions("train"), lesions("test")
    codes = {name: _read("gi_lesions", "paper_splits_50", f"{k}{name}.csv", header=None)
             for name in ("Y_train", "gt_train", "gt_test")}
    for name, idx, cols in (("Y_train", train, table.columns[1:]),
                            ("gt_train", train, ["ground_truth"]),
                            ("gt_test", test, ["ground_truth"])):
        decoded = codes[name].replace(_GI_SPLIT_CODES).to_numpy()
        if (decoded != table.loc[idx, cols].to_numpy()).any():
            raise ValueError(f"gi_lesions split {k}: {name} disagrees with the label table.")
    return _gi_split(table, task, classes, x, train, test, pgt_gold)


def _gi_split(table, task, classes, x, train, test, pgt_gold) -> dict:
    if task == "binary":
        table = table.replace(_GI_BINARY)
    return {
        "train": _gi_annotations(table.loc[train].reset_index(), classes, x.loc[train]),
        "test_features": x.loc[test],
        "test_gold": table.loc[test, "ground_truth"],
        "pgt_gold": pgt_gold,
    }


def _zheng(name: str, classes: list) -> Annotations:
    """A data set of Zheng et al. (2017): ``answer.csv.gz`` (item, worker, answer)
    and ``truth.csv`` (item, truth), gold kept for the items that have labels.

    Rows that repeat a (item, worker) pair are kept as published (adult content
    and relevance have some), so the bundled numbers stay comparable with
    earlier measurements on these files."""
    answers = _read("zheng2017", name, "answer.csv.gz", compression="gzip")
    answers.columns = ["item", "worker", "label"]
    truth = _read("zheng2017", name, "truth.csv")
    truth.columns = ["item", "truth"]
    gold = _item_truth(truth, f"zheng2017/{name}/truth.csv")
    gold = gold[gold.index.isin(answers["item"])]
    return Annotations.from_frame(answers, item="item", annotator="worker", label="label",
                                  classes=classes, gold=gold, duplicates="keep")


def load_sentiment() -> Annotations:
    """Tweet sentiment, binary (Zheng, Li, Li, Shan & Cheng, PVLDB 2017).

    Y. Zheng, G. Li, Y. Li, C. Shan and R. Cheng (2017), "Truth Inference in
    Crowdsourcing: Is the Problem Solved?", PVLDB 10(5), 541-552; their
    ``sentiment`` set. 1000 items, 85 workers, 20 labels per item (20000
    labels, no repeated pair), classes [0, 1], gold for every item. Majority
    vote reaches 0.93 accuracy (0.9320).

    Examples
    --------
    >>> ann = cm.datasets.load_sentiment()
    """
    return _zheng("sentiment", [0, 1])


def load_adult_content() -> Annotations:
    """Adult-content ratings of web sites, 4 ordered levels (Zheng et al., PVLDB 2017).

    Ipeirotis, Provost and Wang's AdultContent2 labels as published by Zheng et
    al. (2017) (see :func:`load_sentiment`). 11040 sites, 825 workers, 92721
    labels, classes [0, 1, 2, 3] (G < PG < R < X). Gold for 333 sites: the
    truth file rates 1517 sites, of which 1184 have no label and are dropped.
    Every row of the answer file is kept: 2922 (site, worker) pairs are
    repeated (2773 of them with the same label), and the families count each
    repeat as a label. Majority vote reaches 0.76 accuracy (0.7628).

    Examples
    --------
    >>> ann = cm.datasets.load_adult_content()
    """
    return _zheng("adult_content", [0, 1, 2, 3])


def load_relevance() -> Annotations:
    """TREC 2010 relevance feedback judgements (Zheng et al., PVLDB 2017).

    The TREC 2010 Relevance Feedback track's crowd labels of query-document
    pairs as published by Zheng et al. (2017) (see :func:`load_sentiment`).
    20232 pairs, 766 workers, 98453 labels, classes [0, 1, 2, 3]: 0..2 rate
    relevance, 3 marks a broken link (not a level of that scale, so the set is
    not ordinal). Gold for 4460 pairs. Every row is kept: 1570 (pair, worker)
    pairs are repeated (1289 with the same label), each counted as a label.
    Majority vote reaches 0.54 accuracy (0.5357).

    Examples
    --------
    >>> ann = cm.datasets.load_relevance()
    """
    return _zheng("relevance", [0, 1, 2, 3])


def _binary_text_ids(folder, labels, sep, columns, truth, duplicates) -> Annotations:
    """A headerless binary label file and its ``item truth`` file, ids as text;
    gold kept for the labelled items."""
    df = _read(folder, labels, sep=sep, header=None, names=columns,
               dtype={"item": str, "worker": str})
    gold = _item_truth(_read(folder, truth, sep="\t", header=None, names=["item", "truth"],
                             dtype={"item": str}), f"{folder}/{truth}")
    return Annotations.from_frame(df, item="item", annotator="worker", label="label",
                                  classes=[0, 1], gold=gold[gold.index.isin(df["item"])],
                                  duplicates=duplicates)


def load_mozafari(duplicates: str = "keep") -> Annotations:
    """Binary Mechanical Turk labels of Mozafari et al. (VLDB 2014).

    The ``BarzanMozafari`` set distributed with Ipeirotis' Get-Another-Label
    (Apache License 2.0), from B. Mozafari, P. Sarkar, M. Franklin, M. Jordan
    and S. Madden (2014), "Scaling Up Crowd-Sourcing to Very Large Datasets: A
    Case for Active Learning", PVLDB 8(2). 1000 items, 83 workers, 5 labels per
    item (5000 labels, no worker labels an item twice), classes [0, 1] (the
    files do not say what they mean), gold for every item (509 of class 0, 491
    of class 1). Majority vote reaches 0.70 accuracy (0.6960; 5 voters, no
    ties). Ids are read as text (items as written, ``'201'``). ``duplicates``
    goes to :meth:`Annotations.from_frame`; the file repeats no (item, worker)
    pair, so it changes nothing (the default as in :func:`load_duchenne`).

    Examples
    --------
    >>> ann = cm.datasets.load_mozafari()
    >>> ann.n_items, ann.n_annotators, ann.n_annotations
    """
    return _binary_text_ids("mozafari", "labels.txt", "\t", ["worker", "item", "label"],
                            "evaluation.txt", duplicates)


def load_duchenne(duplicates: str = "keep") -> Annotations:
    """Is a smile a Duchenne smile? Binary labels of Whitehill et al. (NeurIPS 2009).

    J. Whitehill, P. Ruvolo, T. Wu, J. Bergsma and J. Movellan (2009), "Whose
    Vote Should Count More: Optimal Integration of Labels from Labelers of
    Unknown Expertise", NeurIPS 22 (the GLAD paper); academic use, cite the
    paper. Classes [0, 1] (1 = Duchenne). Image and worker ids are read as
    text: the images are four-digit strings, ``'0001'`` .. ``'2162'``.

    2134 images, 64 workers (18 to 5367 labels each) and 30319 label rows
    with the default ``duplicates="keep"``. The rows repeat (image, worker)
    pairs: 17729 distinct pairs, 6446 of them given more than once (up to 11
    times), 12590 rows beyond each pair's first. 11032 of those rows repeat
    an earlier row's label exactly; 1558 pairs have both labels. The repeats
    are the workers' own relabelling (a worker met the same image in several
    tasks: the conflicting pairs rule out an export written twice), and the
    paper's evaluation used every row, so the default keeps every row as
    published, silently, each counted as a label; that is how the bundled
    Zheng et al. sets are loaded too (:func:`load_adult_content`).
    ``duplicates="drop"`` keeps the first of exact repeats (19287 rows; the
    1558 conflicting pairs keep both labels, with a warning), ``"warn"``
    keeps every row and warns, ``"error"`` refuses them.

    Gold from expert facial-expression coders for 160 images (ids
    ``'2001'`` .. ``'2162'``), 159 of which have crowd labels (101 of class
    0, 58 of class 1 among them); the other is dropped. Majority vote reaches
    0.72 accuracy on those 159 (0.7233, ties to class 0; 0.7547 with
    ``duplicates="drop"``, which counts a heavy worker's repeats once).

    Examples
    --------
    >>> ann = cm.datasets.load_duchenne()
    >>> ann.n_items, ann.n_annotators, ann.n_annotations
    """
    return _binary_text_ids("duchenne", "mturklabels.txt", " ", ["item", "worker", "label"],
                            "groundtruth.txt", duplicates)


def load_wsd(duplicates: str = "keep") -> Annotations:
    """Word-sense disambiguation labels (Snow et al., EMNLP 2008).

    The word-sense task of Snow, O'Connor, Jurafsky and Ng (2008) (see
    :func:`load_rte`; licence none stated): 177 occurrences of one word, 34
    workers, 10 labels per item (1770 labels, no worker labels an item
    twice), classes [1, 2, 3] (sense codes), gold for every item (129 / 2 /
    46 of senses 1 / 2 / 3). Majority vote reaches 0.99 accuracy (0.9944).
    Ids are read as text; ``duplicates`` as in :func:`load_mozafari`.

    Examples
    --------
    >>> ann = cm.datasets.load_wsd()
    >>> ann.n_items, ann.n_annotators, ann.n_annotations
    """
    with _path("wsd", "wsd.standardized.tsv").open("r") as fh:
        df = pd.read_csv(fh, sep="\t", dtype={"orig_id": str, "!amt_worker_ids": str})
    gold = _item_truth(df.rename(columns={"orig_id": "item", "gold": "truth"}),
                       "wsd/wsd.standardized.tsv")
    return Annotations.from_frame(
        df, item="orig_id", annotator="!amt_worker_ids", label="response",
        classes=[1, 2, 3], gold=gold, duplicates=duplicates,
    )


DATASETS = {
    "rte": load_rte,
    "bluebirds": load_bluebirds,
    "anesthesia": load_anesthesia,
    "dog": load_dog,
    "web_search": load_web_search,
    "music_genre": load_music_genre,
    "gi_lesions": load_gi_lesions,
    "sentiment": load_sentiment,
    "adult_content": load_adult_content,
    "relevance": load_relevance,
    "mozafari": load_mozafari,
    "duchenne": load_duchenne,
    "wsd": load_wsd,
}
"""Name -> loader."""
