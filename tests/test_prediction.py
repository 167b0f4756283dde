"""cm.predict: the truth of new items from a fit's classifier, against the
classifier computed by hand from the fit's parameters and draws."""

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, softmax

import crowd_models as cm
from crowd_models.inference import laplace_fit
from crowd_models.models import dawid_skene, ordinal, spammer, two_coin

NEW = np.random.default_rng(7).standard_normal((500, 5))  # new items, sim_features' 5 features


def standardised(X, ann):
    """New items' features on the training items' standard scale, by hand: the
    families with a classifier fit on standardised features."""
    return (X - ann.features.mean(axis=0)) / ann.features.std(axis=0)


@pytest.fixture(scope="module")
def laplace_map(sim_features):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return cm.fit_map(two_coin.build_model(sim_features), laplace=True, random_seed=0)


def test_an_em_fit_predicts_its_classifier(sim_features, tmp_path):
    fit = two_coin.em(sim_features)
    coef, intercept = fit["coef"].values[0, 0], float(fit["intercept"].values[0, 0])
    out = cm.predict(fit, NEW)
    np.testing.assert_allclose(out["prob"].values[:, 1],
                               expit(standardised(NEW, sim_features) @ coef + intercept))
    np.testing.assert_allclose(out["prob"].sum("true_class"), 1.0)
    np.testing.assert_allclose(out["prob"].values[:, 1], two_coin.predict(fit, NEW))
    assert out.attrs["draws"] == 1 and "prob_lower" not in out
    # a DataFrame is read by its column names, in any order, its index naming the items
    names = list(sim_features.feature_names)
    frame = pd.DataFrame(NEW, columns=names, index=[f"new{i}" for i in range(500)])
    by_name = cm.predict(fit, frame[names[::-1]])
    np.testing.assert_allclose(by_name["prob"].values, out["prob"].values)
    assert by_name["item"].values[0] == "new0"
    # the same from the fit reloaded from disk
    cm.save_fit(fit, tmp_path / "fit.nc")
    again = cm.predict(cm.open_fit(tmp_path / "fit.nc"), NEW)
    np.testing.assert_allclose(again["prob"].values, out["prob"].values)


def test_laplace_draws_give_the_mean_of_per_draw_predictions_and_intervals(laplace_map,
                                                                         sim_features):
    out = cm.predict(laplace_map, NEW, ci_prob=0.8)
    post = laplace_fit(laplace_map)["posterior"]
    coef = post["coef"].values.reshape(-1, 5)
    intercept = post["intercept"].values.reshape(-1)
    per_draw = expit(standardised(NEW, sim_features) @ coef.T + intercept)  # (item, draw)
    assert out.attrs["draws"] == per_draw.shape[1] == 1000
    np.testing.assert_allclose(out["prob"].values[:, 1], per_draw.mean(axis=1))
    np.testing.assert_allclose(out["prob_lower"].values[:, 1],
                               np.quantile(per_draw, 0.1, axis=1))
    np.testing.assert_allclose(out["prob_best"].values[:, 1], (per_draw > 0.5).mean(axis=1))
    np.testing.assert_allclose(out["prob_best"].sum("true_class"), 1.0)
    # the simulated truth's probabilities, inside their intervals on most new items
    truth = expit(NEW @ sim_features.truth["coef"].values - 0.5)
    inside = ((out["prob_lower"].values[:, 1] <= truth)
              & (truth <= out["prob_upper"].values[:, 1])).mean()
    assert inside > 0.6, inside


def test_dawid_skene_and_cumulative_ordinal_classifiers(rng):
    conf = np.stack([np.eye(3) * 0.7 + 0.1] * 4)
    ann = dawid_skene.simulate(conf, n_items=300, n_features=2, rng=rng)
    fit = dawid_skene.em(ann)
    X = rng.standard_normal((20, 2))
    eta = standardised(X, ann) @ fit["coef"].values[0, 0] + fit["intercept"].values[0, 0]
    np.testing.assert_allclose(cm.predict(fit, X)["prob"].values, softmax(eta, axis=1))
    web = cm.datasets.load_web_search()
    features = rng.standard_normal((web.n_items, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cumulative model's repair
        cumulative = ordinal.em(web.with_features(features))
    exceed = expit((X - features.mean(axis=0)) / features.std(axis=0)
                   @ cumulative["coef"].values[0, 0] + cumulative["intercept"].values[0, 0])
    out = cm.predict(cumulative, X)
    np.testing.assert_allclose(out["prob"].values, ordinal.class_probabilities(exceed)[0])
    assert list(out["true_class"].values) == list(web.classes)


def test_bad_input(sim_features, sim_plain):
    fit = two_coin.em(sim_features)
    names = list(sim_features.feature_names)
    frame = pd.DataFrame(NEW, columns=names)
    with pytest.raises(ValueError, match=r"missing: \['x4'\]|missing: "):
        cm.predict(fit, frame.drop(columns=names[-1]))
    with pytest.raises(ValueError, match="not in the fit: \\['extra'\\]"):
        cm.predict(fit, frame.assign(extra=1.0))
    with pytest.raises(ValueError, match="with the fit's 5 features"):
        cm.predict(fit, NEW[:, :3])
    with pytest.raises(ValueError, match=r"1 item\(s\) are missing or not finite \(rows \[2\]\)"):
        cm.predict(fit, np.where(np.arange(500)[:, None] == 2, np.nan, NEW))
    with pytest.raises(ValueError, match="fitted without features"):
        cm.predict(two_coin.em(sim_plain), NEW)
    with pytest.raises(ValueError, match="has no classifier of the features"):
        cm.predict(spammer.em(sim_plain), NEW)
    sklearn = pytest.importorskip("sklearn.linear_model", reason="needs scikit-learn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        black_box = two_coin.em(sim_features, classifier=sklearn.LogisticRegression(),
                                max_iter=3)
    with pytest.raises(ValueError, match="that estimator's predict_proba"):
        cm.predict(black_box, NEW)
    with pytest.raises(ValueError, match="ci_prob"):
        cm.predict(fit, NEW, ci_prob=1.5)


def test_the_feature_accuracy_classifier():
    from crowd_models.models import feature_accuracy

    ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    fit = feature_accuracy.em(ann, penalty=2.0)
    X = np.random.default_rng(2).standard_normal((30, 4))
    by_hand = expit(standardised(X, ann) @ fit["coef"].values[0, 0]
                    + float(fit["intercept"].values[0, 0]))
    out = cm.predict(fit, X)
    np.testing.assert_allclose(out["prob"].values[:, 1], by_hand)
    np.testing.assert_allclose(feature_accuracy.predict(fit, X), by_hand)


def test_a_continuous_fit_predicts_the_true_value_and_its_spread():
    """The regression's predictive distribution: one EM point gives Normal(mean,
    1 / truth_precision); Laplace draws give the mixture, whose quantiles are
    checked against a large sample of it, and which holds the simulated true
    values of new items at about the nominal rate."""
    from scipy.stats import norm

    from crowd_models.models import continuous

    rng = np.random.default_rng(4)
    coef = np.array([1.0, -0.5])
    ann = continuous.simulate([4.0, 2.0, 1.0], n_items=400, n_features=2, coef=coef,
                              intercept=3.0, truth_precision=4.0, rng=rng)
    X = rng.standard_normal((300, 2))
    em = continuous.em(ann)
    out = cm.predict(em, X)
    mean = standardised(X, ann) @ em["coef"].values[0, 0] + float(em["intercept"].values[0, 0])
    sd = 1 / np.sqrt(float(em["truth_precision"].values[0, 0]))
    np.testing.assert_allclose(out["value"].values, mean)
    np.testing.assert_allclose(out["value_sd"].values, sd)
    np.testing.assert_allclose(out["value_lower"].values, norm.ppf(0.05, mean, sd), atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = cm.fit_map(continuous.build_model(ann), laplace=True, random_seed=0)
    mixture = cm.predict(fit, X[:5], ci_prob=0.8)
    post = laplace_fit(fit)["posterior"]
    means = (post["coef"].values.reshape(-1, 2) @ standardised(X[:5], ann).T
             + post["intercept"].values.reshape(-1, 1))
    sds = 1 / np.sqrt(post["truth_precision"].values.reshape(-1, 1))
    sample = means + sds * np.random.default_rng(0).standard_normal((200, *means.shape))
    np.testing.assert_allclose(mixture["value_lower"].values,
                               np.quantile(sample.reshape(-1, 5), 0.1, axis=0), atol=0.01)
    truth = X @ coef + 3.0 + rng.standard_normal(300) / 2.0
    inside = ((out["value_lower"].values <= truth) & (truth <= out["value_upper"].values)).mean()
    assert 0.85 < inside < 0.95, inside  # 90% intervals


def test_the_fit_standardises_the_features_and_predict_applies_it(sim_features, tmp_path):
    """Features on any scale and origin give the fit and the predictions that
    features already standardised give: the families fit on the training items'
    standard scale, record it, and cm.predict applies it to new items (from EM,
    MAP and reloaded fits alike)."""
    raw = sim_features.features * np.array([1000.0, 0.01, 3.0, 1.0, 50.0]) + 7.0
    shifted = sim_features.with_features(raw)
    new = NEW * np.array([1000.0, 0.01, 3.0, 1.0, 50.0]) + 7.0
    fit = two_coin.em(shifted)
    reference = two_coin.em(sim_features.with_features(standardised(sim_features.features,
                                                                    sim_features)))
    np.testing.assert_allclose(fit["coef"].values, reference["coef"].values, rtol=1e-6)
    np.testing.assert_allclose(fit.attrs["feature_center"], raw.mean(axis=0))
    np.testing.assert_allclose(fit.attrs["feature_scale"], raw.std(axis=0))
    expected = cm.predict(reference, standardised(NEW, sim_features))["prob"].values
    np.testing.assert_allclose(cm.predict(fit, new)["prob"].values, expected, rtol=1e-6)
    cm.save_fit(fit, tmp_path / "fit.nc")
    np.testing.assert_allclose(cm.predict(cm.open_fit(tmp_path / "fit.nc"), new)["prob"].values,
                               expected, rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        map_fit = cm.fit_map(two_coin.build_model(shifted))
    np.testing.assert_allclose(map_fit.attrs["feature_scale"], raw.std(axis=0))
    np.testing.assert_allclose(cm.predict(map_fit, new)["prob"].values, expected, atol=1e-4)
    # the raw features stay available, and a constant feature is only centred
    np.testing.assert_allclose(shifted.standardized().raw_features, raw)
    constant = shifted.with_features(np.column_stack([raw[:, :4], np.full(len(raw), 2.5)]))
    assert constant.standardized().feature_scale[-1] == 1.0
    np.testing.assert_allclose(constant.standardized().features[:, -1], 0.0)
