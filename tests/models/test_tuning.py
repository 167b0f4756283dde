"""A black-box classifier's regularisation chosen from the crowd (models/_tuning.py)."""

import warnings

import numpy as np
import pytest

from crowd_models.models import _tuning, dawid_skene, two_coin

pytest.importorskip("sklearn", reason="needs scikit-learn")
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

CONFUSION = [[[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]],
             [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]],
             [[0.7, 0.3, 0.0], [0.1, 0.8, 0.1], [0.0, 0.3, 0.7]],
             [[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]]]


@pytest.fixture(scope="module")
def crowd():
    return dawid_skene.simulate(np.array(CONFUSION), n_items=240, n_features=4,
                                labels_per_item=3, rng=np.random.default_rng(7))


def test_held_out_brier_by_hand(crowd):
    """The score of a logistic regression so penalised that it predicts the
    training fold's class shares (lbfgs leaves the intercept unpenalised),
    computed by hand: the labels-only Dawid-Skene EM (flat class shares) gives
    the soft labels q, and every fold's items are scored by sum_c (q_c - s_c)^2
    with s the other items' mean posterior."""
    plain = dawid_skene.em(crowd.with_features(None), prevalence_prior=1.0, tol=1e-12)
    prob = plain["item_class_prob"].values[0, 0]
    fold = np.random.default_rng(0).permutation(crowd.n_items) % _tuning.FOLDS
    total = sum(np.sum((prob[fold == k] - prob[fold != k].mean(axis=0)) ** 2)
                for k in range(_tuning.FOLDS))
    clf = LogisticRegression(tol=1e-10, max_iter=10_000)
    with pytest.warns(UserWarning, match="stopped after 3 iterations"):
        fit = dawid_skene.em(crowd, classifier=clf, regularization={"C": [1e-9, 1.0]},
                             tol=1e-12, max_iter=3)
    assert fit.attrs["classifier_grid"] == "1e-09, 1.0"
    assert fit.attrs["classifier_brier"][0] == pytest.approx(total / crowd.n_items, rel=1e-6)
    # the features carry the truth, so the unpenalised classifier predicts q better
    assert fit.attrs["classifier_brier"][1] < fit.attrs["classifier_brier"][0]
    assert clf.C == 1.0 and fit.attrs["classifier_tuning"].startswith("C=1.0 chosen")


def test_auto_sets_the_best_value_of_the_grid(crowd):
    """regularization='auto' searches the class's grid when its parameter holds
    the default, and sets the value with the highest held-out score."""
    clf = LogisticRegression()
    fit = dawid_skene.em(crowd, classifier=clf, tol=1e-6)
    name, grid, _ = _tuning.GRIDS["LogisticRegression"]
    brier = fit.attrs["classifier_brier"]
    assert fit.attrs["classifier_parameter"] == name and len(brier) == len(grid)
    assert clf.C == grid[int(np.argmin(brier))]
    assert f"C={clf.C!r} chosen by the held-out expected Brier" in fit.attrs["classifier_tuning"]
    assert f"C={clf.C!r}" in fit.attrs["classifier"]  # repr of the fitted estimator
    # the strongest penalty ignores the features: it predicts q worst here
    assert np.argmax(brier) == 0
    # a Pipeline's last step, named as set_params names it
    piped = make_pipeline(StandardScaler(), MLPClassifier(max_iter=50, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = two_coin.em(two_coin.simulate([0.8] * 3, [0.7] * 3, n_items=100, n_features=2,
                                            rng=np.random.default_rng(1)),
                          classifier=piped, tol=1e-3, max_iter=2)
    assert fit.attrs["classifier_parameter"] == "mlpclassifier__alpha"
    assert piped[-1].alpha in sum(_tuning.GRIDS["MLPClassifier"][1:], ())


def test_the_search_goes_past_the_grids_strong_end_while_it_scores_best(crowd):
    """Features of pure noise: every penalty fits noise the stronger one does not,
    so the grid's strongest C scores best and the search tries the further values
    in turn. Each value's score is the one a caller's grid of that value alone
    gets (the same folds), and the value set is the smallest score's."""
    noise = crowd.with_features(np.random.default_rng(3).normal(size=(crowd.n_items, 30)))
    name, grid, further = _tuning.GRIDS["LogisticRegression"]
    clf = LogisticRegression()
    fit = dawid_skene.em(noise, classifier=clf, tol=1e-4)
    tried = [float(v) for v in fit.attrs["classifier_grid"].split(", ")]
    brier = fit.attrs["classifier_brier"]
    reached = len(tried) - len(grid)
    assert reached >= 1 and tried == list(reversed(further[:reached])) + list(grid)
    # each step went on only while the strongest value tried so far was the best
    for k in range(reached):
        assert np.argmin(brier[reached - k:]) == 0
    assert reached == len(further) or np.argmin(brier) != 0
    assert clf.C == tried[int(np.argmin(brier))] and clf.C < grid[0] * 10
    for value, score in zip(tried[:reached + 1], brier, strict=False):
        with pytest.warns(UserWarning, match="stopped after 1 iterations"):
            alone = dawid_skene.em(noise, classifier=LogisticRegression(),
                                   regularization={"C": [value]}, tol=1e-4, max_iter=1)
        assert alone.attrs["classifier_brier"][0] == pytest.approx(score, rel=1e-9)
    # features that carry the truth: the strong end scores worst, nothing is added
    informative = dawid_skene.em(crowd, classifier=LogisticRegression(), tol=1e-4)
    assert informative.attrs["classifier_grid"] == ", ".join(repr(v) for v in grid)


def test_as_given_and_its_reasons(crowd):
    """A value the caller set, a class without a known parameter and
    regularization=None leave the classifier as it is, and say why."""
    cases = [(LogisticRegression(C=0.5), "auto", "as given: C=0.5 set by the caller"),
             (GaussianNB(), "auto", "as given: GaussianNB has no known regularisation"),
             (LogisticRegression(), None, "as given (regularization=None)")]
    for clf, regularization, reason in cases:
        before = clf.get_params()
        fit = dawid_skene.em(crowd, classifier=clf, regularization=regularization, tol=1e-4)
        assert fit.attrs["classifier_tuning"].startswith(reason)
        assert clf.get_params() == before and "classifier_brier" not in fit.attrs
    few = crowd.select(crowd.item_idx < 15)
    fit = dawid_skene.em(few, classifier=LogisticRegression(), tol=1e-4)
    assert fit.attrs["classifier_tuning"].startswith("as given: 15 items, fewer than 20")


def test_bad_regularization(crowd):
    clf = LogisticRegression()
    with pytest.raises(ValueError, match="takes one parameter and its values"):
        dawid_skene.em(crowd, classifier=clf, regularization={"C": [1.0], "tol": [1e-4]})
    with pytest.raises(ValueError, match="'alpha', which is not a parameter of "
                                         "LogisticRegression"):
        dawid_skene.em(crowd, classifier=clf, regularization={"alpha": [1.0]})
    with pytest.raises(ValueError, match="gives no value to try"):
        dawid_skene.em(crowd, classifier=clf, regularization={"C": []})
    with pytest.raises(ValueError, match="regularization must be 'auto', None or"):
        dawid_skene.em(crowd, classifier=clf, regularization="yes")
    # the built-in classifier's precisions, which classifier= would ignore
    with pytest.raises(ValueError, match=r"coef_precision=4.0 is a prior of the built-in "
                                         r"classifier, and classifier= replaces it"):
        dawid_skene.em(crowd, classifier=clf, coef_precision=4.0)
    with pytest.raises(ValueError, match=r"intercept_precision=1.0 is a prior of the built-in"):
        two_coin.em(two_coin.simulate([0.8] * 3, [0.7] * 3, n_items=30, n_features=2,
                                      rng=np.random.default_rng(0)),
                    classifier=clf, intercept_precision=1.0)
    # flat precisions say nothing: the family's FLAT_PRIORS go with any classifier
    flat = two_coin.em(two_coin.simulate([0.8] * 3, [0.7] * 3, n_items=30, n_features=2,
                                         rng=np.random.default_rng(0)),
                       classifier=LogisticRegression(), regularization=None, tol=1e-3,
                       **two_coin.FLAT_PRIORS)
    assert flat.attrs["classifier"].startswith("LogisticRegression")


def test_every_grid_names_a_parameter_of_its_class_and_holds_its_default(crowd):
    """Each GRIDS entry is a parameter of that scikit-learn class, and the class's
    default is one of the values searched (so "auto" can keep it); a histogram
    gradient booster, never in the benchmarks, is tuned end to end."""
    import inspect

    from sklearn import ensemble, linear_model, neural_network, svm, tree

    classes = {cls.__name__: cls for module in (ensemble, linear_model, neural_network, svm,
                                                tree)
               for cls in vars(module).values() if isinstance(cls, type)}
    for kind, (name, grid, _) in _tuning.GRIDS.items():
        default = inspect.signature(classes[kind].__init__).parameters[name].default
        assert name in classes[kind]().get_params() and default in grid, kind
    booster = ensemble.HistGradientBoostingClassifier(max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 3 steps do not settle a booster
        fit = dawid_skene.em(crowd, classifier=booster, tol=1e-3, max_iter=3)
    assert fit.attrs["classifier_parameter"] == "l2_regularization"
    tried = fit.attrs["classifier_grid"].split(", ")
    assert repr(booster.l2_regularization) == tried[int(np.argmin(fit.attrs["classifier_brier"]))]
