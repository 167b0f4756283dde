"""Tests for `crowd_models.data.Annotations`: parsing, orders, errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from crowd_models.data import Annotations


# A small long table with known codes:
#   items (first appearance):      q3, q1, q2
#   annotators (first appearance): bob, amy, cat
#   classes (sorted):              no, yes
#   bob labels q1 twice (rows 4 and 6); both rows count.
def long_df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item": ["q3", "q1", "q3", "q2", "q1", "q2", "q1"],
            "annotator": ["bob", "amy", "amy", "bob", "bob", "cat", "bob"],
            "label": ["no", "yes", "yes", "no", "yes", "yes", "no"],
        }
    )


ITEM_IDX = [0, 1, 0, 2, 1, 2, 1]
ANN_IDX = [0, 1, 1, 0, 0, 2, 0]
LABEL_CODES = [0, 1, 1, 0, 1, 1, 0]


@pytest.fixture
def ann() -> Annotations:
    return Annotations.from_frame(long_df())


# =================================================================== behaviour
class TestFromFrame:
    def test_codes_and_coordinates(self, ann):
        assert list(ann.items) == ["q3", "q1", "q2"]
        assert list(ann.annotators) == ["bob", "amy", "cat"]
        assert list(ann.classes) == ["no", "yes"]
        np.testing.assert_array_equal(ann.item_idx, ITEM_IDX)
        np.testing.assert_array_equal(ann.annotator_idx, ANN_IDX)
        np.testing.assert_array_equal(ann.labels, LABEL_CODES)
        # int64 codes: arithmetic on them cannot wrap (the parser's narrow types do not
        # leak out)
        assert ann.item_idx.dtype == ann.annotator_idx.dtype == ann.labels.dtype == np.int64
        assert (ann.n_items, ann.n_annotators, ann.n_classes, ann.n_annotations) == (3, 3, 2, 7)
        assert not ann.continuous
        assert ann.features is None and ann.feature_names is None and ann.n_features == 0
        assert ann.gold is None and not ann.has_gold

    def test_coords(self, ann):
        c = ann.coords()
        assert set(c) == {"item", "annotator", "true_class", "label_class"}
        assert list(c["item"]) == ["q3", "q1", "q2"]
        assert list(c["annotator"]) == ["bob", "amy", "cat"]
        assert list(c["true_class"]) == list(c["label_class"]) == ["no", "yes"]

    def test_repeated_labels_are_kept_and_counted(self, ann):
        # bob gave q1 both "yes" and "no"; amy gave q1 "yes"
        np.testing.assert_array_equal(ann.class_counts(), [[1, 1], [1, 2], [1, 1]])
        np.testing.assert_array_equal(ann.n_labels(), [4, 2, 1])
        assert ann.class_counts().sum() == ann.n_annotations

    def test_declared_classes_keep_their_order_and_unused_classes(self):
        with pytest.warns(UserWarning, match="'maybe' of classes= never occur"):
            a = Annotations.from_frame(long_df(), classes=["yes", "no", "maybe"])
        assert list(a.classes) == ["yes", "no", "maybe"]
        assert a.n_classes == 3
        np.testing.assert_array_equal(a.labels, [1 - c for c in LABEL_CODES])
        # nobody said "maybe", yet it has a column of zeros
        np.testing.assert_array_equal(a.class_counts(), [[1, 1, 0], [2, 1, 0], [1, 1, 0]])
        assert list(a.coords()["true_class"]) == ["yes", "no", "maybe"]

    def test_numeric_classes_sort_numerically(self):
        df = pd.DataFrame({"item": [1, 1, 2, 2], "annotator": [7, 8, 7, 8],
                           "label": [10, 9, 2, 10]})
        a = Annotations.from_frame(df)
        assert list(a.classes) == [2, 9, 10]
        np.testing.assert_array_equal(a.labels, [2, 1, 0, 2])
        assert list(a.items) == [1, 2]
        assert list(a.annotators) == [7, 8]

    def test_custom_column_names(self):
        df = long_df().rename(columns={"item": "task", "annotator": "worker", "label": "answer"})
        a = Annotations.from_frame(df, item="task", annotator="worker", label="answer")
        np.testing.assert_array_equal(a.item_idx, ITEM_IDX)
        np.testing.assert_array_equal(a.annotator_idx, ANN_IDX)
        np.testing.assert_array_equal(a.labels, LABEL_CODES)

    def test_index_of_the_table_does_not_matter(self):
        df = long_df()
        df.index = ["r7", "r1", "r5", "r2", "r3", "r6", "r4"]
        a = Annotations.from_frame(df)
        np.testing.assert_array_equal(a.item_idx, ITEM_IDX)
        np.testing.assert_array_equal(a.labels, LABEL_CODES)

    def test_input_table_is_not_modified(self):
        df = long_df()
        before = df.copy()
        Annotations.from_frame(df, features=np.ones((3, 1)), gold=["no", None, "yes"])
        pd.testing.assert_frame_equal(df, before)

    def test_bool_labels(self):
        df = long_df().assign(label=[lab == "yes" for lab in long_df()["label"]])
        a = Annotations.from_frame(df)
        assert list(a.classes) == [False, True]  # True is the second (positive) class
        np.testing.assert_array_equal(a.labels, LABEL_CODES)
        np.testing.assert_array_equal(a.class_counts(), [[1, 1], [1, 2], [1, 1]])
        g = Annotations.from_frame(df, gold=pd.Series({"q1": True, "q2": False}))
        np.testing.assert_array_equal(g.gold, [-1, 1, 0])

    def test_continuous_labels_parse_as_floats(self):
        df = long_df().assign(label=[1, 2, 3, 4, 5, 6, 7])  # integers in
        a = Annotations.from_frame(df, continuous=True)
        assert a.continuous
        assert a.classes is None
        assert a.labels.dtype == np.float64
        np.testing.assert_array_equal(a.labels, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
        assert set(a.coords()) == {"item", "annotator"}
        np.testing.assert_array_equal(a.n_labels(), [4, 2, 1])

    def test_continuous_labels_from_numeric_strings(self):
        df = long_df().assign(label=["0.5", "1", "-2.25", "3", "4", "5", "6e-1"])
        a = Annotations.from_frame(df, continuous=True)
        np.testing.assert_allclose(a.labels, [0.5, 1.0, -2.25, 3.0, 4.0, 5.0, 0.6])

    def test_repr(self, ann):
        r = repr(ann)
        assert "7 labels" in r and "3 items" in r and "3 annotators" in r
        assert "2 classes ['no', 'yes']" in r and "gold=no" in r


class TestFromWide:
    def test_keeps_row_and_column_order_and_skips_missing(self):
        # the first row only has column "a", so first appearance would put "a"
        # before "z"; the matrix's column order must win
        m = pd.DataFrame(
            {"z": [np.nan, "n", "y"], "a": ["y", None, "y"]}, index=["r2", "r1", "r3"]
        )
        a = Annotations.from_wide(m)
        assert list(a.items) == ["r2", "r1", "r3"]
        assert list(a.annotators) == ["z", "a"]
        assert list(a.classes) == ["n", "y"]
        assert a.n_annotations == 4
        cells = {
            (a.items[i], a.annotators[j], a.classes[k])
            for i, j, k in zip(a.item_idx, a.annotator_idx, a.labels, strict=True)
        }
        assert cells == {("r2", "a", "y"), ("r1", "z", "n"), ("r3", "z", "y"), ("r3", "a", "y")}

    def test_integer_matrix_with_nan_gives_integer_classes_like_the_long_form(self):
        m = pd.DataFrame({"a": [0, 1, np.nan], "b": [1, np.nan, 2]}, index=["i", "j", "k"])
        assert m["a"].dtype == float  # NaN upcast the integers to 1.0 etc.
        wide = Annotations.from_wide(m)
        long = Annotations.from_frame(
            pd.DataFrame({"item": ["i", "i", "j", "k"], "annotator": ["a", "b", "a", "b"],
                          "label": [0, 1, 1, 2]})
        )
        assert wide.classes.equals(long.classes)
        assert wide.classes.dtype == long.classes.dtype == np.int64
        assert list(wide.classes) == [0, 1, 2]
        np.testing.assert_array_equal(wide.item_idx, long.item_idx)
        np.testing.assert_array_equal(wide.annotator_idx, long.annotator_idx)
        np.testing.assert_array_equal(wide.labels, long.labels)
        assert list(wide.to_frame()["label"]) == [0, 1, 1, 2]

    def test_integer_classes_declared_with_nan_matrix(self):
        m = np.array([[1.0, np.nan], [0.0, 1.0]])
        a = Annotations.from_wide(m, classes=[0, 1, 2])
        assert list(a.classes) == [0, 1, 2]
        np.testing.assert_array_equal(a.labels, [1, 0, 1])

    def test_numpy_array_gets_positional_ids(self):
        m = np.array([[1, np.nan, 0], [np.nan, 0, 0]])
        a = Annotations.from_wide(m)
        assert list(a.items) == [0, 1]
        assert list(a.annotators) == [0, 1, 2]
        np.testing.assert_array_equal(a.item_idx, [0, 0, 1, 1])
        np.testing.assert_array_equal(a.annotator_idx, [0, 2, 1, 2])
        np.testing.assert_array_equal(a.labels, [1, 0, 0, 0])

    def test_bool_matrix_with_missing(self):
        m = pd.DataFrame({"a": [True, np.nan, False], "b": [True, True, None]})
        a = Annotations.from_wide(m)
        assert list(a.classes) == [False, True]
        np.testing.assert_array_equal(a.labels, [1, 1, 1, 0])

    def test_continuous(self):
        m = pd.DataFrame({"a": [1.5, np.nan], "b": [2, 3]}, index=["x", "y"])
        a = Annotations.from_wide(m, continuous=True)
        assert a.continuous
        assert a.labels.dtype == np.float64
        np.testing.assert_array_equal(a.labels, [1.5, 2.0, 3.0])

    def test_features_and_gold(self):
        m = pd.DataFrame({"a": [0, 1], "b": [1, 1]}, index=["x", "y"])
        feats = pd.DataFrame({"f": [20.0, 10.0]}, index=["y", "x"])
        a = Annotations.from_wide(m, features=feats, gold=pd.Series({"y": 1}))
        np.testing.assert_array_equal(a.features, [[10.0], [20.0]])
        np.testing.assert_array_equal(a.gold, [-1, 1])


class TestFeatures:
    def test_dataframe_is_reordered_to_item_order_by_id(self):
        feats = pd.DataFrame({"age": [2.0, 1.0, 3.0], 7: [20, 10, 30]}, index=["q1", "q2", "q3"])
        a = Annotations.from_frame(long_df(), features=feats)
        # items are q3, q1, q2
        np.testing.assert_array_equal(a.features, [[3.0, 30.0], [2.0, 20.0], [1.0, 10.0]])
        assert a.features.dtype == np.float64
        assert list(a.feature_names) == ["age", "7"]
        assert a.n_features == 2
        assert list(a.coords()["feature"]) == ["age", "7"]

    def test_array_is_kept_as_given(self):
        x = np.array([[1, 2], [3, 4], [5, 6]])
        a = Annotations.from_frame(long_df(), features=x)
        np.testing.assert_array_equal(a.features, x)
        assert a.features.dtype == np.float64
        assert list(a.feature_names) == ["x0", "x1"]

    def test_bool_array_and_bool_column(self):
        a = Annotations.from_frame(long_df(), features=np.array([[True], [False], [True]]))
        np.testing.assert_array_equal(a.features, [[1.0], [0.0], [1.0]])
        feats = pd.DataFrame({"flag": [True, False, False]}, index=["q3", "q1", "q2"])
        b = Annotations.from_frame(long_df(), features=feats)
        np.testing.assert_array_equal(b.features, [[1.0], [0.0], [0.0]])

    def test_with_features(self, ann):
        x = np.arange(6.0).reshape(3, 2)
        b = ann.with_features(x)
        np.testing.assert_array_equal(b.features, x)
        assert ann.features is None  # the original is unchanged
        np.testing.assert_array_equal(b.labels, ann.labels)
        assert b.with_features(None).features is None
        assert b.with_features(None).feature_names is None
        c = ann.with_features(pd.DataFrame({"f": [1.0, 2.0, 3.0]}, index=["q1", "q2", "q3"]))
        np.testing.assert_array_equal(c.features, [[3.0], [1.0], [2.0]])


class TestGold:
    def test_partial_series_gives_minus_one(self):
        gold = pd.Series({"q1": "yes", "q2": np.nan})  # q3 absent, q2 NaN
        a = Annotations.from_frame(long_df(), gold=gold)
        np.testing.assert_array_equal(a.gold, [-1, 1, -1])
        assert a.gold.dtype == np.int64
        assert a.has_gold

    def test_integer_classes_with_nan_in_series(self):
        df = long_df().assign(label=LABEL_CODES)
        gold = pd.Series({"q3": 1, "q1": np.nan, "q2": 0})  # float dtype: 1.0, NaN, 0.0
        a = Annotations.from_frame(df, gold=gold)
        np.testing.assert_array_equal(a.gold, [1, -1, 0])

    def test_array_is_aligned_with_item_order(self):
        a = Annotations.from_frame(long_df(), gold=["yes", None, "no"])
        np.testing.assert_array_equal(a.gold, [1, -1, 0])

    def test_gold_series_round_trip(self):
        gold = pd.Series({"q2": "no", "q3": "yes"})
        a = Annotations.from_frame(long_df(), gold=gold)
        s = a.gold_series()
        assert s.name == "gold"
        assert s.to_dict() == {"q3": "yes", "q2": "no"}
        b = Annotations.from_frame(long_df(), gold=s)
        np.testing.assert_array_equal(b.gold, a.gold)

    def test_no_gold(self, ann):
        assert ann.gold_series().empty
        a = Annotations.from_frame(long_df(), gold=pd.Series({"q1": np.nan}))
        np.testing.assert_array_equal(a.gold, [-1, -1, -1])
        assert not a.has_gold
        assert a.gold_series().empty

    def test_continuous_gold(self):
        df = long_df().assign(label=np.arange(7.0))
        a = Annotations.from_frame(df, continuous=True, gold=pd.Series({"q1": 2.5}))
        np.testing.assert_array_equal(a.gold, [np.nan, 2.5, np.nan])
        assert a.has_gold
        assert a.gold_series().to_dict() == {"q1": 2.5}
        b = Annotations.from_frame(df, continuous=True, gold=[np.nan, np.nan, np.nan])
        assert not b.has_gold


class TestToFrame:
    def test_round_trip(self, ann):
        out = ann.to_frame()
        assert list(out.columns) == ["item", "annotator", "label"]
        pd.testing.assert_frame_equal(out, long_df(), check_dtype=False)
        back = Annotations.from_frame(out)
        for name in ("item_idx", "annotator_idx", "labels"):
            np.testing.assert_array_equal(getattr(back, name), getattr(ann, name))
        assert back.items.equals(ann.items)
        assert back.annotators.equals(ann.annotators)
        assert back.classes.equals(ann.classes)

    def test_round_trip_with_declared_classes(self):
        a = Annotations.from_frame(long_df(), classes=["yes", "no", "maybe"])
        back = Annotations.from_frame(a.to_frame(), classes=a.classes)
        np.testing.assert_array_equal(back.labels, a.labels)
        assert back.classes.equals(a.classes)

    def test_continuous(self):
        df = long_df().assign(label=np.linspace(0.0, 1.0, 7))
        a = Annotations.from_frame(df, continuous=True)
        back = Annotations.from_frame(a.to_frame(), continuous=True)
        np.testing.assert_array_equal(back.labels, a.labels)
        np.testing.assert_array_equal(back.item_idx, a.item_idx)


class TestSelect:
    def test_drops_items_and_annotators_without_labels_and_carries_extras(self):
        feats = np.array([[3.0], [1.0], [2.0]])  # q3, q1, q2
        a = Annotations.from_frame(long_df(), features=feats, gold=["no", "yes", None])
        a = replace(a, truth=xr.Dataset())
        # keep only rows on q3 and q1 by bob and amy: q2 and cat disappear
        mask = np.array([True, True, True, False, True, False, True])
        s = a.select(mask)
        assert list(s.items) == ["q3", "q1"]
        assert list(s.annotators) == ["bob", "amy"]
        assert list(s.classes) == ["no", "yes"]
        np.testing.assert_array_equal(s.item_idx, [0, 1, 0, 1, 1])
        np.testing.assert_array_equal(s.annotator_idx, [0, 1, 1, 0, 0])
        np.testing.assert_array_equal(s.labels, [0, 1, 1, 1, 0])
        np.testing.assert_array_equal(s.features, [[3.0], [1.0]])
        assert list(s.feature_names) == ["x0"]
        np.testing.assert_array_equal(s.gold, [0, 1])
        assert s.truth is None
        # the original is unchanged
        assert a.n_items == 3 and a.n_annotations == 7

    def test_integer_indices_and_remapped_codes(self, ann):
        s = ann.select([3, 5])  # q2 by bob and cat
        assert list(s.items) == ["q2"]
        assert list(s.annotators) == ["bob", "cat"]
        np.testing.assert_array_equal(s.item_idx, [0, 0])
        np.testing.assert_array_equal(s.annotator_idx, [0, 1])
        np.testing.assert_array_equal(s.labels, [0, 1])
        np.testing.assert_array_equal(s.class_counts(), [[1, 1]])

    def test_keeps_classes_nobody_uses_any_more(self, ann):
        s = ann.select(ann.labels == 1)
        assert list(s.classes) == ["no", "yes"]
        np.testing.assert_array_equal(s.class_counts()[:, 0], 0)

    def test_select_all_is_identity(self, ann):
        s = ann.select(np.ones(ann.n_annotations, dtype=bool))
        for name in ("item_idx", "annotator_idx", "labels"):
            np.testing.assert_array_equal(getattr(s, name), getattr(ann, name))
        assert s.items.equals(ann.items) and s.annotators.equals(ann.annotators)


# ====================================================================== errors
class TestFromFrameErrors:
    def test_not_a_dataframe(self):
        with pytest.raises(TypeError, match=r"expects a pandas DataFrame.*got dict"):
            Annotations.from_frame(long_df().to_dict())
        with pytest.raises(TypeError, match=r"got ndarray.*use Annotations\.from_wide"):
            Annotations.from_frame(np.zeros((3, 3)))

    @pytest.mark.parametrize("arg", ["item", "annotator", "label"])
    def test_missing_column(self, arg):
        with pytest.raises(ValueError, match=rf"column 'nope' \(the {arg} column\) is not in "
                                             rf"the table.*Pass {arg}="):
            Annotations.from_frame(long_df(), **{arg: "nope"})

    def test_missing_default_column(self):
        df = long_df().rename(columns={"label": "answer"})
        with pytest.raises(ValueError, match=r"column 'label' \(the label column\) is not in the "
                                             r"table; its columns are 'item', 'annotator', "
                                             r"'answer'"):
            Annotations.from_frame(df)

    def test_zero_rows(self):
        with pytest.raises(ValueError, match=r"zero annotations \(no rows\)"):
            Annotations.from_frame(long_df().iloc[:0])

    @pytest.mark.parametrize("col", ["item", "annotator"])
    def test_missing_ids(self, col):
        df = long_df()
        df.loc[2, col] = None
        df.loc[5, col] = np.nan
        with pytest.raises(ValueError, match=rf"column '{col}' \(the {col} ids\) is missing on "
                                             rf"2 row\(s\), e\.g\. rows 2, 5"):
            Annotations.from_frame(df)

    @pytest.mark.parametrize("bad", [np.nan, None])
    def test_nan_label(self, bad):
        df = long_df()
        df.index = [f"r{i}" for i in range(7)]
        df.loc["r3", "label"] = bad
        with pytest.raises(ValueError, match=r"column 'label' \(the labels\) is missing or empty "
                                             r"on 1 row\(s\), e\.g\. rows 'r3'"):
            Annotations.from_frame(df)

    def test_nan_label_numeric(self):
        df = long_df().assign(label=[0, 1, 1, np.nan, 1, 1, 0])
        with pytest.raises(ValueError, match=r"missing or empty on 1 row"):
            Annotations.from_frame(df)

    @pytest.mark.parametrize("bad", ["", "   "])
    def test_empty_string_label(self, bad):
        df = long_df()
        df.loc[1, "label"] = bad
        df.loc[4, "label"] = bad
        with pytest.raises(ValueError, match=r"missing or empty on 2 row\(s\), e\.g\. rows 1, 4"):
            Annotations.from_frame(df)

    def test_empty_string_label_string_dtype(self):
        df = long_df().assign(label=pd.array(["no", "yes", "", "no", "yes", "yes", "no"],
                                             dtype="string"))
        with pytest.raises(ValueError, match=r"missing or empty on 1 row"):
            Annotations.from_frame(df)

    def test_labels_outside_classes(self):
        with pytest.raises(ValueError, match=r"labels 'no' in column 'label' are not among the "
                                             r"classes \['yes', 'maybe'\] \(on 3 row\(s\)\)"):
            Annotations.from_frame(long_df(), classes=["yes", "maybe"])

    def test_labels_outside_classes_because_of_type(self):
        df = long_df().assign(label=LABEL_CODES)
        with pytest.raises(ValueError, match=r"not among the classes \['0', '1'\].*types "
                                             r"matter"):
            Annotations.from_frame(df, classes=["0", "1"])

    def test_duplicate_classes(self):
        with pytest.raises(ValueError, match=r"classes= has duplicates"):
            Annotations.from_frame(long_df(), classes=["no", "yes", "no"])

    def test_single_class_without_classes(self):
        df = long_df().assign(label="yes")
        with pytest.raises(ValueError, match=r"every label is 'yes': one class only"):
            Annotations.from_frame(df)

    def test_single_class_declared(self):
        df = long_df().assign(label="yes")
        with pytest.raises(ValueError, match=r"classes= must name at least two classes, "
                                             r"got \['yes'\]"):
            Annotations.from_frame(df, classes=["yes"])

    def test_single_class_is_fine_when_others_are_declared(self):
        df = long_df().assign(label="yes")
        a = Annotations.from_frame(df, classes=["no", "yes"])
        np.testing.assert_array_equal(a.labels, 1)

    def test_unsortable_mixed_labels(self):
        df = long_df().assign(label=["a", 1, "a", 1, "a", 1, 2])
        with pytest.raises(TypeError, match=r"mix types that cannot be sorted.*pass "
                                            r"classes=\[\.\.\.\]"):
            Annotations.from_frame(df)
        # declaring the order resolves it
        a = Annotations.from_frame(df, classes=["a", 1, 2])
        np.testing.assert_array_equal(a.labels, [0, 1, 0, 1, 0, 1, 2])

    def test_continuous_non_numeric(self):
        df = long_df().assign(label=[1.0, "high", 2.0, 3.0, 4.0, 5.0, 6.0])
        with pytest.raises(TypeError, match=r"continuous labels must be numbers; column 'label' "
                                            r"holds non-numeric values 'high'"):
            Annotations.from_frame(df, continuous=True)

    @pytest.mark.parametrize("bad", [np.inf, -np.inf])
    def test_continuous_infinite(self, bad):
        df = long_df().assign(label=[1.0, 2.0, bad, 3.0, 4.0, 5.0, 6.0])
        with pytest.raises(ValueError, match=r"continuous labels must be finite.*infinite values "
                                             r"on rows 2"):
            Annotations.from_frame(df, continuous=True)

    def test_continuous_nan(self):
        df = long_df().assign(label=[1.0, 2.0, np.nan, 3.0, 4.0, 5.0, 6.0])
        with pytest.raises(ValueError, match=r"missing or empty on 1 row"):
            Annotations.from_frame(df, continuous=True)

    def test_classes_with_continuous(self):
        df = long_df().assign(label=np.arange(7.0))
        with pytest.raises(ValueError, match=r"continuous labels have no classes"):
            Annotations.from_frame(df, classes=[0.0, 1.0], continuous=True)

    def test_n_classes_of_continuous(self):
        a = Annotations.from_frame(long_df().assign(label=np.arange(7.0)), continuous=True)
        with pytest.raises(ValueError, match=r"continuous annotations have no classes"):
            a.n_classes  # noqa: B018
        with pytest.raises(ValueError, match=r"continuous annotations have no classes"):
            a.class_counts()


class TestFeatureErrors:
    def test_duplicate_index(self):
        feats = pd.DataFrame({"f": [1.0, 2.0, 3.0, 4.0]}, index=["q1", "q2", "q3", "q1"])
        with pytest.raises(ValueError, match=r"features' index \(item ids\) has duplicates: "
                                             r"'q1'"):
            Annotations.from_frame(long_df(), features=feats)

    def test_non_numeric_columns(self):
        feats = pd.DataFrame({"f": [1.0, 2.0, 3.0], "colour": ["r", "g", "b"]},
                             index=["q1", "q2", "q3"])
        with pytest.raises(TypeError, match=r"features must be numeric; columns 'colour' are "
                                            r"not"):
            Annotations.from_frame(long_df(), features=feats)

    def test_missing_items(self):
        feats = pd.DataFrame({"f": [1.0, 2.0]}, index=["q1", "q3"])
        with pytest.raises(ValueError, match=r"features are missing for 1 item\(s\) with labels, "
                                             r"e\.g\. 'q2'"):
            Annotations.from_frame(long_df(), features=feats)

    def test_extra_items(self):
        feats = pd.DataFrame({"f": [1.0, 2.0, 3.0, 4.0]}, index=["q1", "q2", "q3", "q9"])
        with pytest.raises(ValueError, match=r"features hold 1 item\(s\) that have no labels, "
                                             r"e\.g\. 'q9'"):
            Annotations.from_frame(long_df(), features=feats)

    def test_one_dimensional_array(self):
        with pytest.raises(ValueError, match=r"features must be 2-D \(item, feature\), got "
                                             r"shape \(3,\)"):
            Annotations.from_frame(long_df(), features=np.array([1.0, 2.0, 3.0]))

    def test_wrong_number_of_rows(self):
        with pytest.raises(ValueError, match=r"features have 2 rows but there are 3 items"):
            Annotations.from_frame(long_df(), features=np.ones((2, 4)))

    def test_non_numeric_array(self):
        with pytest.raises(TypeError, match=r"features must be numeric, got dtype"):
            Annotations.from_frame(long_df(), features=np.array([["a"], ["b"], ["c"]]))
        with pytest.raises(TypeError, match=r"features must be numeric, got dtype object"):
            Annotations.from_frame(long_df(), features=np.array([[1], ["b"], [2]], dtype=object))

    @pytest.mark.parametrize("bad", [np.nan, np.inf])
    def test_non_finite_values_in_dataframe(self, bad):
        feats = pd.DataFrame({"f": [1.0, 2.0, 3.0], "g": [1.0, bad, 3.0]},
                             index=["q1", "q2", "q3"])
        with pytest.raises(ValueError, match=r"features hold 1 NaN or infinite value\(s\), in "
                                             r"feature\(s\) 'g' of item\(s\) 'q2'"):
            Annotations.from_frame(long_df(), features=feats)

    @pytest.mark.parametrize("bad", [np.nan, -np.inf])
    def test_non_finite_values_in_array(self, bad):
        x = np.ones((3, 2))
        x[0, 1] = bad  # item q3 (first appearance), feature x1
        with pytest.raises(ValueError, match=r"NaN or infinite value\(s\), in feature\(s\) 'x1' "
                                             r"of item\(s\) 'q3'"):
            Annotations.from_frame(long_df(), features=x)

    def test_zero_columns(self):
        with pytest.raises(ValueError, match=r"features have zero columns"):
            Annotations.from_frame(long_df(), features=np.ones((3, 0)))
        with pytest.raises(ValueError, match=r"features have zero columns"):
            Annotations.from_frame(long_df(), features=pd.DataFrame(index=["q1", "q2", "q3"]))

    def test_with_features_checks_too(self, ann):
        with pytest.raises(ValueError, match=r"features have 4 rows but there are 3 items"):
            ann.with_features(np.ones((4, 1)))


class TestGoldErrors:
    def test_duplicate_ids(self):
        gold = pd.Series(["yes", "no", "yes"], index=["q1", "q2", "q1"])
        with pytest.raises(ValueError, match=r"gold has duplicate item ids: 'q1'"):
            Annotations.from_frame(long_df(), gold=gold)

    def test_unknown_ids_are_ignored_with_a_warning(self):
        # users hold full gold files: ids without labels are dropped, and counted
        gold = pd.Series({"q1": "yes", "q7": "no"})
        with pytest.warns(UserWarning, match=r"gold holds 1 item id\(s\) that have no labels "
                                             r"\(e\.g\. 'q7'\); they are ignored"):
            ann = Annotations.from_frame(long_df(), gold=gold)
        assert list(ann.gold) == [-1, 1, -1]

    def test_values_outside_classes(self):
        with pytest.raises(ValueError, match=r"gold labels 'maybe' are not among the classes "
                                             r"\['no', 'yes'\]"):
            Annotations.from_frame(long_df(), gold=pd.Series({"q1": "maybe", "q2": "no"}))
        with pytest.raises(ValueError, match=r"gold labels 'YES' are not among the classes"):
            Annotations.from_frame(long_df(), gold=["yes", "YES", None])

    @pytest.mark.parametrize("n", [2, 4])
    def test_wrong_length_array(self, n):
        with pytest.raises(ValueError, match=rf"gold has {n} entries but there are 3 items"):
            Annotations.from_frame(long_df(), gold=["yes"] * n)

    def test_not_one_dimensional(self):
        # a scalar must not be broadcast to every item
        with pytest.raises(ValueError, match=r"gold must be 1-D .*got shape \(\)"):
            Annotations.from_frame(long_df(), gold="yes")
        with pytest.raises(ValueError, match=r"gold must be 1-D .*got shape \(3, 1\)"):
            Annotations.from_frame(long_df(), gold=[["yes"], ["no"], ["yes"]])

    @pytest.mark.parametrize("bad", [np.inf, -np.inf, "high"])
    def test_non_finite_continuous_gold(self, bad):
        df = long_df().assign(label=np.arange(7.0))
        with pytest.raises(ValueError, match=r"gold values must be finite numbers for continuous "
                                             r"labels; items 'q1'"):
            Annotations.from_frame(df, continuous=True, gold=[1.0, bad, np.nan])
        with pytest.raises(ValueError, match=r"gold values must be finite numbers"):
            Annotations.from_frame(df, continuous=True, gold=pd.Series({"q1": bad}))


class TestFromWideErrors:
    @pytest.mark.parametrize("shape", [(4,), (2, 2, 2)])
    def test_not_two_dimensional(self, shape):
        with pytest.raises(ValueError, match=r"2-D items x annotators matrix, got an array with "
                                             r"shape"):
            Annotations.from_wide(np.zeros(shape))

    def test_wrong_type(self):
        with pytest.raises(TypeError, match=r"from_wide expects a DataFrame \(items x "
                                            r"annotators\) or a 2-D numpy array, got list"):
            Annotations.from_wide([[0, 1], [1, 0]])

    def test_duplicate_index(self):
        m = pd.DataFrame({"a": [0, 1, 1], "b": [1, 0, 1]}, index=["x", "y", "x"])
        with pytest.raises(ValueError, match=r"item ids \(the index\) contain duplicates: 'x'"):
            Annotations.from_wide(m)

    def test_duplicate_columns(self):
        m = pd.DataFrame([[0, 1, 1], [1, 0, 1]], columns=["a", "b", "a"])
        with pytest.raises(ValueError, match=r"annotator ids \(the columns\) contain duplicates: "
                                             r"'a'"):
            Annotations.from_wide(m)

    def test_all_missing_annotator_column(self):
        m = pd.DataFrame({"a": [0, 1], "b": [np.nan, np.nan], "c": [1, 1]})
        with pytest.raises(ValueError, match=r"annotator\(s\) 'b' have no labels \(all "
                                             r"missing\)"):
            Annotations.from_wide(m)

    def test_all_missing_item_row(self):
        m = pd.DataFrame({"a": [0, np.nan, 1], "b": [1, None, 1]}, index=["x", "y", "z"])
        with pytest.raises(ValueError, match=r"item\(s\) 'y' have no labels \(all missing\)"):
            Annotations.from_wide(m)

    def test_label_errors_name_the_cell(self):
        m = pd.DataFrame({"a": ["n", "y"], "b": ["y", " "]}, index=["x", "z"])
        with pytest.raises(ValueError, match=r"missing or empty on 1 row\(s\), e\.g\. rows "
                                             r"\('z', 'b'\)"):
            Annotations.from_wide(m)

    def test_continuous_non_numeric(self):
        m = pd.DataFrame({"a": [1.0, "x"], "b": [2.0, 3.0]})
        with pytest.raises(TypeError, match=r"continuous labels must be numbers.*'x'"):
            Annotations.from_wide(m, continuous=True)

    def test_continuous_infinite(self):
        m = pd.DataFrame({"a": [1.0, np.inf], "b": [2.0, 3.0]})
        with pytest.raises(ValueError, match=r"continuous labels must be finite"):
            Annotations.from_wide(m, continuous=True)


class TestSelectErrors:
    @pytest.mark.parametrize("n", [6, 8])
    def test_wrong_mask_shape(self, ann, n):
        with pytest.raises(ValueError, match=rf"row mask has shape \({n},\), expected \(7,\)"):
            ann.select(np.ones(n, dtype=bool))

    def test_empty_selection(self, ann):
        with pytest.raises(ValueError, match=r"selection keeps zero annotations"):
            ann.select(np.zeros(7, dtype=bool))
        with pytest.raises(ValueError, match=r"selection keeps zero annotations"):
            ann.select([])


def test_html_summary_counts_what_the_table_holds():
    frame = pd.DataFrame({"item": [1, 1, 2, 2, 2, 3], "annotator": ["u", "v", "u", "v", "w", "w"],
                          "label": ["a", "b", "a", "a", "<b>", "a"]})
    ann = Annotations.from_frame(frame, gold=pd.Series({1: "a", 3: "<b>"}))
    html = ann._repr_html_()
    assert "<th style='text-align:left'>labels</th><td style='text-align:left'>6<" in html
    assert "3 (labels each: median 2, max 3)" in html  # items: 2, 3, 1 labels
    assert "3 (labels each: median 2, max 2)" in html  # annotators u, v, w: 2 each
    assert "&lt;b&gt;: 1, a: 4, b: 1" in html  # class names escaped, sorted, counted
    assert "2 of 3 items" in html
    cont = Annotations.from_frame(frame.assign(label=[0.5, 1.0, 2.0, 2.5, 3.0, 4.0]),
                                  continuous=True)
    assert "continuous, from 0.5 to 4" in cont._repr_html_()
