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


@pytest.fixture(scope="module")
def laplace_map(sim_features):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return cm.fit_map(two_coin.build_model(sim_features), laplace=True, random_seed=0)


def test_an_em_fit_predicts_its_classifier(sim_features, tmp_path):
    fit = two_coin.em(sim_features)
    coef, intercept = fit["coef"].values[0, 0], float(fit["intercept"].values[0, 0])
    out = cm.predict(fit, NEW)
    np.testing.assert_allclose(out["prob"].values[:, 1], expit(NEW @ coef + intercept))
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
    per_draw = expit(NEW @ coef.T + intercept)  # (item, draw), by hand
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
    eta = X @ fit["coef"].values[0, 0] + fit["intercept"].values[0, 0]
    np.testing.assert_allclose(cm.predict(fit, X)["prob"].values, softmax(eta, axis=1))
    web = cm.datasets.load_web_search()
    features = rng.standard_normal((web.n_items, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the cumulative model's repair
        cumulative = ordinal.em(web.with_features(features))
    exceed = expit(X @ cumulative["coef"].values[0, 0] + cumulative["intercept"].values[0, 0])
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
    with pytest.raises(ValueError, match="ci_prob"):
        cm.predict(fit, NEW, ci_prob=1.5)


def test_the_feature_accuracy_classifier():
    from crowd_models.models import feature_accuracy

    ann = feature_accuracy.simulate(300, n_annotators=5, n_features=4, rng=0)
    fit = feature_accuracy.em(ann, penalty=2.0)
    X = np.random.default_rng(2).standard_normal((30, 4))
    by_hand = expit(X @ fit["coef"].values[0, 0] + float(fit["intercept"].values[0, 0]))
    out = cm.predict(fit, X)
    np.testing.assert_allclose(out["prob"].values[:, 1], by_hand)
    np.testing.assert_allclose(feature_accuracy.predict(fit, X), by_hand)
