"""Parsing gaps of `Annotations` (issue "Trustworthy results"): inputs that were
accepted silently or refused with a misleading message.

Each class is one gap; the test names say what is expected now. No model is
fitted: these are parsing tests only.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from crowd_models.data import Annotations


def long_df(**columns) -> pd.DataFrame:
    """items q3, q1, q2; annotators bob, amy, cat; classes no, yes."""
    df = pd.DataFrame(
        {
            "item": ["q3", "q1", "q3", "q2", "q1", "q2", "q1"],
            "annotator": ["bob", "amy", "amy", "bob", "bob", "cat", "bob"],
            "label": ["no", "yes", "yes", "no", "yes", "yes", "no"],
        }
    )
    return df.assign(**columns)


def no_warnings(fn, *args, **kwargs):
    """Call fn, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


# 1 ------------------------------------------------------------ infinite labels
class TestNonFiniteLabels:
    @pytest.mark.parametrize("bad", [np.inf, -np.inf])
    def test_inf_is_not_a_class(self, bad):
        df = long_df(label=[0.0, 1.0, bad, 0.0, 1.0, 1.0, bad])
        with pytest.raises(ValueError, match=r"column 'label' holds the non-finite label\(s\) "
                                             r"-?inf on 2 row\(s\), e\.g\. rows 2, 6: inf and "
                                             r"-inf are not classes\. Drop or correct"):
            Annotations.from_frame(df)

    def test_inf_among_string_labels(self):
        df = long_df(label=["no", "yes", np.inf, "no", "yes", "yes", "no"])
        with pytest.raises(ValueError, match=r"non-finite label\(s\) inf on 1 row\(s\), e\.g\. "
                                             r"rows 2"):
            Annotations.from_frame(df, classes=["no", "yes"])

    def test_inf_in_a_wide_matrix_names_the_cell(self):
        m = pd.DataFrame({"a": [0, 1, np.inf], "b": [1, np.nan, 0]}, index=["x", "y", "z"])
        with pytest.raises(ValueError, match=r"non-finite label\(s\) inf on 1 row\(s\), e\.g\. "
                                             r"rows \('z', 'a'\)"):
            Annotations.from_wide(m)

    @pytest.mark.parametrize("bad", [np.inf, np.nan, None])
    def test_declared_classes_must_be_finite(self, bad):
        df = long_df(label=[0, 1, 1, 0, 1, 1, 0])
        with pytest.raises(ValueError, match=r"classes= holds .*: a class must be a finite "
                                             r"value"):
            Annotations.from_frame(df, classes=[0, 1, bad])

    @pytest.mark.parametrize("bad", [np.inf, "-inf"])
    def test_continuous_inf_names_rows_and_count(self, bad):
        df = long_df(label=[1.0, 2.0, 3.0, bad, 4.0, 5.0, 6.0])
        with pytest.raises(ValueError, match=r"continuous labels must be finite; column 'label' "
                                             r"holds infinite values on rows 3 \(1 row\(s\)\): "
                                             r"inf and -inf are not labels"):
            Annotations.from_frame(df, continuous=True)


# 2 ------------------------------------------- whitespace (and type) near-duplicates
class TestNearDuplicates:
    def test_labels_differing_in_whitespace_warn_and_stay_apart(self):
        df = long_df(label=["no", "yes", " yes", "no", "yes", "yes ", "no"])
        with pytest.warns(UserWarning, match=r"the labels in column 'label': 'yes' and ' yes' "
                                             r"and 'yes ' differ only in surrounding whitespace, "
                                             r"so they count as different classes\. Pass "
                                             r"strip=True"):
            a = Annotations.from_frame(df)
        assert list(a.classes) == [" yes", "no", "yes", "yes "]  # not stripped silently

    def test_annotator_ids_differing_in_whitespace_warn(self):
        df = long_df(annotator=["Zoë", "amy", "Zoë ", "bob", "Zoë", "amy", "bob"])
        with pytest.warns(UserWarning, match=r"column 'annotator' \(the annotator ids\): 'Zoë' "
                                             r"and 'Zoë ' differ only in surrounding whitespace, "
                                             r"so they count as different annotators"):
            a = Annotations.from_frame(df)
        assert a.n_annotators == 4

    def test_item_ids_differing_in_type_warn(self):
        df = long_df(item=[1, "1", 2, 2, 1, 3, 3])
        with pytest.warns(UserWarning, match=r"the item ids\): 1 and '1' differ only in type, "
                                             r"so they count as different items.*astype\(str\)"):
            a = Annotations.from_frame(df)
        assert a.n_items == 4

    def test_strip_true_merges_ids_labels_classes_and_gold(self):
        df = long_df(annotator=["Zoë", "amy", "Zoë ", "bob", " Zoë", "amy", "bob"],
                     label=["no", "yes", " yes", "no", "yes", "yes ", "no"],
                     item=["q3", "q1 ", "q3", "q2", "q1", "q2", "q1"])
        # the table's repeated (item, annotator) pairs are not what this test is about
        a = no_warnings(Annotations.from_frame, df, strip=True, classes=["no ", " yes"],
                        gold={" q1": "yes ", "q2": " no"}, duplicates="keep")
        assert list(a.annotators) == ["Zoë", "amy", "bob"]
        assert list(a.items) == ["q3", "q1", "q2"]
        assert list(a.classes) == ["no", "yes"]
        np.testing.assert_array_equal(a.labels, [0, 1, 1, 0, 1, 1, 0])
        np.testing.assert_array_equal(a.gold, [-1, 1, 0])

    def test_strip_in_from_wide(self):
        m = pd.DataFrame({"Zoë ": ["y", "n "], "amy": [" y", "n"]}, index=["x ", "z"])
        split = pd.DataFrame({"Zoë ": ["y", "n"], "Zoë": ["y", "n"]})
        with pytest.warns(UserWarning, match=r"the annotator ids \(the columns\): 'Zoë ' and "
                                             r"'Zoë' differ only in surrounding whitespace"):
            Annotations.from_wide(split)
        with pytest.raises(ValueError, match=r"annotator ids \(the columns\) contain duplicates: "
                                             r"'Zoë' \(once stripped of whitespace by "
                                             r"strip=True\)"):
            Annotations.from_wide(split, strip=True)
        a = no_warnings(Annotations.from_wide, m, strip=True)
        assert list(a.annotators) == ["Zoë", "amy"]
        assert list(a.items) == ["x", "z"]
        assert list(a.classes) == ["n", "y"]

    def test_labels_outside_classes_by_whitespace_suggest_strip(self):
        df = long_df(label=["no", " yes", "yes", "no", "yes", "yes", "no"])
        with pytest.raises(ValueError, match=r"labels ' yes' .* differ from the classes only "
                                             r"in surrounding whitespace .*Pass strip=True"):
            Annotations.from_frame(df, classes=["no", "yes"])


# 3 ----------------------------------------------------- Categorical label column
class TestCategoricalLabels:
    def test_declared_category_order_and_unused_categories_are_classes(self):
        cat = pd.Categorical(long_df()["label"], categories=["yes", "no", "maybe"], ordered=True)
        with pytest.warns(UserWarning, match=r"'maybe' of the categories of column 'label' "
                                             r"never occur among the labels.*"
                                             r"remove_unused_categories"):
            a = Annotations.from_frame(long_df(label=cat))
        assert list(a.classes) == ["yes", "no", "maybe"]
        np.testing.assert_array_equal(a.labels, [1, 0, 0, 1, 0, 0, 1])

    def test_unordered_categorical_keeps_its_category_order_unless_classes_given(self):
        cat = pd.Categorical(long_df()["label"], categories=["yes", "no"])
        a = no_warnings(Annotations.from_frame, long_df(label=cat), duplicates="keep")
        assert list(a.classes) == ["yes", "no"]
        # classes= takes precedence over the categories
        b = Annotations.from_frame(long_df(label=cat), classes=["no", "yes"])
        assert list(b.classes) == ["no", "yes"]

    def test_integer_categories(self):
        cat = pd.Categorical([3, 1, 1, 3, 1, 3, 1], categories=[3, 2, 1])
        with pytest.warns(UserWarning, match=r"class\(es\) 2 of the categories"):
            a = Annotations.from_frame(long_df(label=cat))
        assert list(a.classes) == [3, 2, 1]
        np.testing.assert_array_equal(a.class_counts().sum(axis=0), [3, 0, 4])

    def test_single_category(self):
        cat = pd.Categorical(["yes"] * 7)
        with pytest.raises(ValueError, match=r"Categorical with the single category \['yes'\]"):
            Annotations.from_frame(long_df(label=cat))

    def test_categorical_item_ids_keep_only_used_ids(self):
        items = pd.Categorical(long_df()["item"], categories=["q0", "q1", "q2", "q3"])
        a = Annotations.from_frame(long_df(item=items), gold={"q1": "yes"})
        assert list(a.items) == ["q3", "q1", "q2"]
        assert not isinstance(a.items.dtype, pd.CategoricalDtype)
        np.testing.assert_array_equal(a.gold, [-1, 1, -1])

    def test_categorical_id_columns_code_as_their_text_does(self):
        # read from the categories' codes (no id written out per row): the same
        # codes, ids and order of first appearance as the same column as text
        rng = np.random.default_rng(0)
        df = pd.DataFrame({"item": rng.choice([f"i{k}" for k in range(40)], 300),
                           "annotator": rng.choice(["w9", "w1", "w10", "w2"], 300),
                           "label": rng.choice(["a", "b"], 300)})
        df = df.drop_duplicates(["item", "annotator"])
        text = Annotations.from_frame(df)
        cats = df.assign(item=pd.Categorical(df["item"], categories=sorted(
            set(df["item"]) | {"unused"}, reverse=True)), annotator=df["annotator"].astype(
            "category"))
        coded = Annotations.from_frame(cats)
        for name in ("item_idx", "annotator_idx", "labels"):
            np.testing.assert_array_equal(getattr(coded, name), getattr(text, name))
        assert coded.items.equals(text.items) and coded.annotators.equals(text.annotators)
        # a missing id is refused as it is in a text column
        cats.loc[cats.index[3], "item"] = np.nan
        with pytest.raises(ValueError, match="item"):
            Annotations.from_frame(cats)
        with pytest.raises(ValueError, match="item"):
            Annotations.from_frame(cats.assign(item=cats["item"].astype(object)))

    def test_wide_matrix_of_categoricals(self):
        levels = ["low", "mid", "high"]
        m = pd.DataFrame({"a": pd.Categorical(["high", "low"], categories=levels),
                          "b": pd.Categorical(["mid", np.nan], categories=levels)})
        a = no_warnings(Annotations.from_wide, m)
        assert list(a.classes) == levels
        np.testing.assert_array_equal(a.labels, [2, 1, 0])


# 4 ------------------------------------------------------ one column, two roles
class TestColumnRoles:
    @pytest.mark.parametrize(("kwargs", "roles"), [
        (dict(label="item"), "the item and label columns are both 'item'"),
        (dict(annotator="item"), "the item and annotator columns are both 'item'"),
        (dict(label="annotator"), "the annotator and label columns are both 'annotator'"),
    ])
    def test_one_column_for_two_roles_is_refused(self, kwargs, roles):
        with pytest.raises(ValueError, match=rf"{roles}: one column cannot be both\. Name a "
                                             rf"different column for each"):
            Annotations.from_frame(long_df(), **kwargs)

    def test_duplicate_column_names_in_the_table(self):
        df = pd.concat([long_df(), long_df()[["label"]]], axis=1)
        with pytest.raises(ValueError, match=r"the table has 2 columns named 'label' \(the label "
                                             r"column\); column names must be unique"):
            Annotations.from_frame(df)


# 5 ------------------------------------------------------- empty ids
class TestEmptyIds:
    @pytest.mark.parametrize("col", ["item", "annotator"])
    @pytest.mark.parametrize("bad", ["", "   "])
    def test_empty_or_blank_ids_are_refused_with_rows(self, col, bad):
        df = long_df()
        df.loc[[1, 5], col] = bad
        with pytest.raises(ValueError, match=rf"column '{col}' \(the {col} ids\) is empty or "
                                             rf"whitespace only on 2 row\(s\), e\.g\. rows 1, 5"):
            Annotations.from_frame(df)

    def test_blank_id_after_strip(self):
        df = long_df(annotator=["bob", "amy", "\t", "bob", "bob", "cat", "bob"])
        with pytest.raises(ValueError, match=r"empty or whitespace only on 1 row\(s\), e\.g\. "
                                             r"rows 2"):
            Annotations.from_frame(df, strip=True)

    @pytest.mark.parametrize("bad", ["", " ", np.nan])
    def test_wide_matrix_with_empty_column_name(self, bad):
        m = pd.DataFrame([[0, 1, 1], [1, 0, 1]], columns=["a", bad, "c"])
        with pytest.raises(ValueError, match=r"the annotator ids \(the columns\) hold 1 missing, "
                                             r"empty or whitespace-only id\(s\), at position\(s\) "
                                             r"1"):
            Annotations.from_wide(m)

    def test_wide_matrix_with_empty_index_entry(self):
        m = pd.DataFrame({"a": [0, 1], "b": [1, 1]}, index=["x", ""])
        with pytest.raises(ValueError, match=r"the item ids \(the index\) hold 1 missing"):
            Annotations.from_wide(m)


# 6 ------------------------------------------------ duplicate feature columns
class TestFeatureNames:
    def test_duplicate_feature_columns_are_named(self):
        feats = pd.DataFrame([[1.0, 2.0, 3.0]] * 3, index=["q1", "q2", "q3"],
                             columns=["age", "size", "age"])
        with pytest.raises(ValueError, match=r"features have duplicate column names: 'age'; "
                                             r"each feature needs its own name"):
            Annotations.from_frame(long_df(), features=feats)

    def test_names_equal_as_text_are_refused(self):
        feats = pd.DataFrame({7: [1.0, 2.0, 3.0], "7": [1.0, 2.0, 3.0]},
                             index=["q1", "q2", "q3"])
        with pytest.raises(ValueError, match=r"feature columns 7, '7' have the same name once "
                                             r"converted to text"):
            Annotations.from_frame(long_df(), features=feats)


# 7 --------------------------------------------------------------- gold mapping
class TestGoldMapping:
    def test_dict_is_a_mapping_from_item_id(self):
        a = Annotations.from_frame(long_df(), gold={"q1": "yes", "q2": "no"})
        np.testing.assert_array_equal(a.gold, [-1, 1, 0])
        assert a.gold_series().to_dict() == {"q1": "yes", "q2": "no"}

    def test_dict_with_unknowns_and_integer_ids(self):
        df = long_df(item=[3, 1, 3, 2, 1, 2, 1], label=[0, 1, 1, 0, 1, 1, 0])
        a = Annotations.from_frame(df, gold={1: 1, 2: None, 3: 0})
        np.testing.assert_array_equal(a.gold, [0, 1, -1])

    def test_dict_for_continuous_labels(self):
        df = long_df(label=np.arange(7.0))
        a = Annotations.from_frame(df, continuous=True, gold={"q2": 2.5})
        np.testing.assert_array_equal(a.gold, [np.nan, np.nan, 2.5])

    def test_dataframe_gold_says_to_pick_a_column(self):
        gold = pd.DataFrame({"item": ["q1"], "gold": ["yes"]})
        with pytest.raises(TypeError, match=r"gold must be one column of labels.*got a "
                                            r"DataFrame with columns 'item', 'gold'"):
            Annotations.from_frame(long_df(), gold=gold)


# 8 ------------------------------------------------------ missing-value codes
class TestMissingCodes:
    def test_missing_marks_no_label_in_from_wide(self):
        m = pd.DataFrame({"a": [0, 1, -1], "b": [1, -1, 2]}, index=["i", "j", "k"])
        a = no_warnings(Annotations.from_wide, m, missing=-1)
        assert list(a.classes) == [0, 1, 2]
        assert a.n_annotations == 4
        np.testing.assert_array_equal(a.labels, [0, 1, 1, 2])

    def test_missing_as_a_list_of_codes(self):
        m = pd.DataFrame({"a": ["y", "NA", "n"], "b": ["?", "n", "y"]})
        a = no_warnings(Annotations.from_wide, m, missing=["NA", "?"])
        assert list(a.classes) == ["n", "y"]
        assert a.n_annotations == 4

    def test_negative_code_warns_and_suggests_missing(self):
        m = pd.DataFrame({"a": [0, 1, -1], "b": [1, -1, 2]})
        with pytest.warns(UserWarning, match=r"class\(es\) -1 look like missing-value codes.*"
                                             r"kept as classes\. If they mean no label, pass "
                                             r"missing=\[-1\]"):
            a = Annotations.from_wide(m)
        assert list(a.classes) == [-1, 0, 1, 2]
        # declaring the classes confirms the code: no warning
        b = no_warnings(Annotations.from_wide, m, classes=[-1, 0, 1, 2])
        assert list(b.classes) == [-1, 0, 1, 2]

    @pytest.mark.parametrize("code", ["NA", "missing", "?", "n/a"])
    def test_missing_words_warn(self, code):
        m = pd.DataFrame({"a": ["y", code, "n"], "b": ["n", "n", "y"]})
        with pytest.warns(UserWarning, match=r"look like missing-value codes"):
            Annotations.from_wide(m)

    def test_nines_far_from_the_scale_warn(self):
        df = long_df(label=[1, 2, 3, 99, 4, 5, 2])
        with pytest.warns(UserWarning, match=r"class\(es\) 99 look like missing-value codes.*"
                                             r"drop those rows \(df\[~df\['label'\]\.isin\(\[99\]\)"
                                             r"\]\)"):
            Annotations.from_frame(df)

    @pytest.mark.parametrize(("classes", "flagged"), [
        ([0, 1, 2], []),
        ([-1, 1], []),                     # a +-1 coding
        ([-1, 0, 1], []),                  # symmetric about 0
        ([-1, 0, 1, 2], [-1]),
        ([-99, 1, 2, 3], [-99]),
        (list(range(10)), []),             # 9 ends a 0..9 scale
        ([1, 2, 3, 4, 5, 99], [99]),
        ([0, 1, 999], [999]),
        ([1.0, 2.0, -1.0], [-1.0]),
        (["no", "yes", "NA", " Missing ", "?", "maybe"], ["NA", " Missing ", "?"]),
        ([False, True], []),
    ])
    def test_the_documented_heuristic(self, classes, flagged):
        from crowd_models._parsing import missing_codes as _missing_codes

        assert _missing_codes(classes) == flagged

    def test_missing_that_matches_nothing_warns(self):
        m = pd.DataFrame({"a": ["0", "1"], "b": ["1", "-1"]})
        with pytest.warns(UserWarning, match=r"missing=\[-1\] matches no cell of the matrix.*"
                                             r"Types matter"):
            Annotations.from_wide(m, missing=-1)


# 9 ------------------------------------------ many float classes; capped listings
class TestManyClasses:
    def test_many_float_labels_suggest_continuous(self):
        rng = np.random.default_rng(0)
        df = pd.DataFrame({"item": np.repeat(np.arange(200), 2),
                           "annotator": np.tile(["a", "b"], 200),
                           "label": rng.normal(size=400)})
        with pytest.raises(ValueError, match=r"holds 400 distinct numbers.*not integer class "
                                             r"codes.*Did you mean continuous=True") as err:
            Annotations.from_frame(df)
        assert len(str(err.value)) < 500

    def test_many_integer_labels_warn(self):
        df = pd.DataFrame({"item": np.repeat(np.arange(50), 2),
                           "annotator": np.tile(["a", "b"], 50),
                           "label": np.arange(100)})
        with pytest.warns(UserWarning, match=r"100 distinct integer labels, so there are 100 "
                                             r"classes.*did you mean continuous=True"):
            a = Annotations.from_frame(df)
        assert a.n_classes == 100
        assert "(100 in all)" in repr(a) and len(repr(a)) < 300

    @pytest.mark.filterwarnings("ignore:class\\(es\\) .* never occur:UserWarning")
    def test_class_listing_in_errors_is_capped(self):
        with pytest.raises(ValueError, match=r"not among the classes \[0, 1, 2, 3, 4, 5, 6, 7, 8, "
                                             r"9, \.\.\.\] \(500 in all\)") as err:
            Annotations.from_frame(long_df(), classes=list(range(500)))
        assert len(str(err.value)) < 500
        with pytest.raises(ValueError, match=r"gold labels 'x' are not among the classes "
                                             r"\[.*\] \(500 in all\)"):
            Annotations.from_frame(long_df(label=[0, 1, 2, 3, 4, 5, 6]),
                                   classes=list(range(500)), gold={"q1": "x"})

    def test_long_values_are_cut_in_messages(self):
        df = long_df(label=["no", "yes", "x" * 5000, "no", "yes", "yes", "no"])
        with pytest.raises(ValueError, match=r"labels 'xxx.*\.\.\. in column") as err:
            Annotations.from_frame(df, classes=["no", "yes"])
        assert len(str(err.value)) < 400


# 10 ------------------------------------------------------- gold covering more items
class TestGoldExtraItems:
    def test_extra_gold_ids_are_ignored_with_a_count(self):
        gold = pd.Series({"q1": "yes", "q2": "no"} | {f"z{i}": "no" for i in range(1184)})
        with pytest.warns(UserWarning, match=r"^gold holds 1184 item id\(s\) that have no "
                                             r"labels \(e\.g\. 'z0', 'z1', 'z2', \.\.\. \(1184 "
                                             r"in all\)\); they are ignored\.$"):
            a = Annotations.from_frame(long_df(), gold=gold)
        np.testing.assert_array_equal(a.gold, [-1, 1, 0])

    def test_extra_ids_in_a_dict_and_in_from_wide(self):
        m = pd.DataFrame({"a": [0, 1], "b": [1, 1]}, index=["x", "y"])
        with pytest.warns(UserWarning, match=r"gold holds 1 item id\(s\)"):
            a = Annotations.from_wide(m, gold={"y": 1, "w": 0})
        np.testing.assert_array_equal(a.gold, [-1, 1])

    def test_gold_matching_no_item_is_refused(self):
        # a Series with the default RangeIndex meant in item order
        with pytest.raises(ValueError, match=r"none of gold's 3 item id\(s\) is an item id of "
                                             r"the labels.*pass it as a list or array"):
            Annotations.from_frame(long_df(), gold=pd.Series(["no", "yes", "no"]))


# 11 ------------------------------------------------ id type mismatch with gold
class TestIdTypeMismatch:
    def int_items(self):
        return long_df(item=[3, 1, 3, 2, 1, 2, 1])

    def test_string_gold_ids_for_integer_items(self):
        with pytest.raises(ValueError, match=r"gold's item ids do not match the item ids of the "
                                             r"labels: 2 of gold's ids match the item ids only "
                                             r"once both are converted to text: gold's ids are "
                                             r"str \(e\.g\. '1'\) where the item ids are int"):
            Annotations.from_frame(self.int_items(), gold={"1": "yes", "2": "no"})

    def test_integer_gold_ids_for_string_items(self):
        df = long_df(item=["3", "1", "3", "2", "1", "2", "1"])
        with pytest.raises(ValueError, match=r"gold's ids are int \(e\.g\. 1\) where the item "
                                             r"ids are str.*convert gold's ids with "
                                             r"\.astype\(str\)"):
            Annotations.from_frame(df, gold=pd.Series(["yes", "no"], index=[1, 2]))

    def test_whitespace_gold_ids(self):
        with pytest.raises(ValueError, match=r"differ from the item ids only in surrounding "
                                             r"whitespace \(e\.g\. 'q1 ' against 'q1'\)\. Pass "
                                             r"strip=True"):
            Annotations.from_frame(long_df(), gold={"q1 ": "yes"})

    def test_feature_ids_of_another_type(self):
        feats = pd.DataFrame({"f": [1.0, 2.0, 3.0]}, index=["1", "2", "3"])
        with pytest.raises(ValueError, match=r"the features' index does not match the item ids "
                                             r"of the labels: 3 of the features' ids match"):
            Annotations.from_frame(self.int_items(), features=feats)

    def test_gold_label_of_another_type(self):
        df = long_df(label=[0, 1, 1, 0, 1, 1, 0])
        with pytest.raises(ValueError, match=r"gold labels '1' are not among the classes "
                                             r"\[0, 1\]; 1 of these gold labels match the classes "
                                             r"only once both are converted to text"):
            Annotations.from_frame(df, gold={"q1": "1"})


# 12 ------------------------------------------------------------ ordered levels
class TestOrderedLevels:
    """Level codes 0..K-1 and declared level orders parse, in that order. (The ordinal
    family's own 1..K check lives in crowd_models/models/ordinal.py.)"""

    def test_ordered_categorical_levels_keep_the_declared_order(self):
        levels = ["low", "mid", "high"]
        cat = pd.Categorical(["high", "low", "mid", "mid", "high", "low", "low"],
                             categories=levels, ordered=True)
        a = no_warnings(Annotations.from_frame, long_df(label=cat), duplicates="keep")
        assert list(a.classes) == levels  # not sorted: ['high', 'low', 'mid']
        np.testing.assert_array_equal(a.labels, [2, 0, 1, 1, 2, 0, 0])

    def test_zero_based_integer_levels(self):
        # 0..K-1 codes parse in level order, including a level nobody used when the
        # column is Categorical
        cat = pd.Categorical([0, 3, 2, 0, 3, 0, 2], categories=[0, 1, 2, 3], ordered=True)
        with pytest.warns(UserWarning, match=r"class\(es\) 1 of the categories"):
            a = Annotations.from_frame(long_df(label=cat))
        assert list(a.classes) == [0, 1, 2, 3]
        np.testing.assert_array_equal(a.class_counts().sum(axis=0), [3, 0, 2, 2])


# 13 ------------------------------------------------------ repeated labels, case, float ids
class TestRepeatedLabels:
    """Rows that repeat an (item, annotator) pair are counted aloud (issue "Real files
    in, nothing lost")."""

    def frame(self):
        # q1 by amy twice with 'yes' (an exact repeat) and bob on q2 with 'no' then 'yes'
        return pd.DataFrame({"item": ["q1", "q1", "q1", "q2", "q2", "q2", "q1"],
                             "annotator": ["amy", "bob", "amy", "bob", "amy", "bob", "amy"],
                             "label": ["yes", "no", "yes", "no", "no", "yes", "yes"]})

    def test_default_warns_with_counts_and_keeps_every_row(self):
        with pytest.warns(UserWarning) as record:
            a = Annotations.from_frame(self.frame())
        (message,) = [str(w.message) for w in record if "repeat" in str(w.message)]
        assert message.startswith(
            "2 row(s) repeat an earlier row's item, annotator and label exactly (1 pair(s), "
            "e.g. item 'q1', annotator 'amy': 'yes', 'yes', 'yes'); 1 (item, annotator) "
            "pair(s) have different labels on 2 row(s) (e.g. item 'q2', annotator 'bob': "
            "'no', 'yes').")
        assert "duplicates='drop'" in message and "duplicates='keep'" in message
        assert a.n_annotations == 7
        np.testing.assert_array_equal(a.n_labels(), [4, 3])

    def test_drop_keeps_the_first_of_exact_repeats_and_warns_of_conflicts(self):
        df = self.frame()
        with pytest.warns(UserWarning, match=r"dropped 2 row\(s\) .*; kept: 1 \(item, "
                                             r"annotator\) pair\(s\) have different labels"):
            a = Annotations.from_frame(df, duplicates="drop")
        b = no_warnings(Annotations.from_frame, df.drop_duplicates(), duplicates="keep")
        for name in ("item_idx", "annotator_idx", "labels"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_array_equal(a.n_labels(), [2, 3])

    def test_keep_is_silent_and_error_refuses(self):
        a = no_warnings(Annotations.from_frame, self.frame(), duplicates="keep")
        assert a.n_annotations == 7
        with pytest.raises(ValueError, match=r"^2 row\(s\) repeat .* Pass duplicates='drop'"):
            Annotations.from_frame(self.frame(), duplicates="error")
        with pytest.raises(ValueError, match=r"duplicates='twice' is not one of \['warn', "
                                             r"'keep', 'drop', 'error'\]"):
            Annotations.from_frame(self.frame(), duplicates="twice")

    def test_a_table_without_repeats_is_silent_and_unchanged(self):
        df = self.frame().drop_duplicates(["item", "annotator"])
        a = no_warnings(Annotations.from_frame, df)
        b = no_warnings(Annotations.from_frame, df, duplicates="error")
        np.testing.assert_array_equal(a.labels, b.labels)

    def test_continuous_repeats_compare_values(self):
        df = pd.DataFrame({"item": [1, 1, 1, 2], "annotator": ["a", "a", "b", "a"],
                           "label": [0.5, 0.5, 2.0, 1.0]})
        with pytest.warns(UserWarning, match=r"^1 row\(s\) repeat .* item 1, annotator 'a': "
                                             r"0\.5, 0\.5\)"):
            Annotations.from_frame(df, continuous=True)

    def test_labels_that_differ_only_in_case_warn(self):
        df = self.frame().assign(label=["yes", "no", "Yes", "no", "NO", "yes", "yes"])
        with pytest.warns(UserWarning, match=r"the labels in column 'label': 'yes' and 'Yes'; "
                                             r"'no' and 'NO' differ only in upper and lower "
                                             r"case, so they count as different classes"):
            a = Annotations.from_frame(df, duplicates="keep")
        assert list(a.classes) == ["NO", "Yes", "no", "yes"]

    def test_float_ids_warn_that_text_ids_may_have_merged(self):
        df = pd.DataFrame({"item": [7.0, 1.1, 7.0], "annotator": ["a", "a", "b"],
                           "label": [1, 0, 1]})
        with pytest.warns(UserWarning, match=r"column 'item' \(the item ids\) holds ids as "
                                             r"floating-point numbers \(e\.g\. 7\.0\).*Read the "
                                             r"ids as text"):
            Annotations.from_frame(df)
        no_warnings(Annotations.from_frame, df.assign(item=["7.0", "1.10", "7.0"]))


class TestLongTables:
    """What keeps 10^7 labels cheap: narrow codes, each distinct value looked at once,
    repeated pairs hashed a block of items at a time; the same results as before."""

    def test_code_dtype_is_the_narrowest_that_holds_the_codes(self):
        from crowd_models._parsing import code_dtype

        sizes = (1, 128, 129, 32_768, 32_769, 2**31, 2**31 + 1)
        assert [code_dtype(n) for n in sizes] == [np.int8, np.int8, np.int16, np.int16,
                                                  np.int32, np.int32, np.int64]

    def test_codes_do_not_overflow_counts_or_pairs(self):
        # 300 items and 200 annotators, 3 classes: the parser codes them in int16 and
        # int8, and Annotations hands them out as int64, so that item * 200 +
        # annotator cannot wrap in a user's code
        rng = np.random.default_rng(0)
        n = 4000
        df = pd.DataFrame({"item": rng.integers(0, 300, n).astype(str),
                           "annotator": rng.integers(0, 200, n).astype(str),
                           "label": rng.integers(0, 3, n)})
        with pytest.warns(UserWarning, match="repeat an earlier row"):
            ann = Annotations.from_frame(df)
        assert (ann.item_idx.dtype, ann.annotator_idx.dtype, ann.labels.dtype) == (
            np.int64, np.int64, np.int64)
        assert len(np.unique(ann.item_idx * ann.n_annotators + ann.annotator_idx)) == len(
            pd.DataFrame({"i": ann.item_idx, "a": ann.annotator_idx}).drop_duplicates())
        item, annotator = ann.item_idx.astype(np.int64), ann.annotator_idx.astype(np.int64)
        counts = np.zeros((ann.n_items, 3), dtype=np.int64)
        np.add.at(counts, (item, ann.labels.astype(np.int64)), 1)
        np.testing.assert_array_equal(ann.class_counts(), counts)
        np.testing.assert_array_equal(ann.n_labels(), np.bincount(annotator, minlength=200))
        pairs = pd.Series(item * 200 + annotator)
        dropped = Annotations.from_frame(df, duplicates="drop")
        assert dropped.n_annotations == n - pd.DataFrame(
            {"pair": pairs, "label": ann.labels}).duplicated().sum()
        sub = ann.select(ann.labels != 0)
        assert sub.item_idx.dtype == np.int64 and sub.labels.dtype == np.int64

    def test_repeats_found_a_block_of_items_at_a_time(self):
        from crowd_models._repeats import repeated_labels

        rng = np.random.default_rng(1)
        item = rng.integers(0, 500, 6000).astype(np.int32)
        annotator = rng.integers(0, 40, 6000).astype(np.int16)
        labels = rng.integers(0, 3, 6000).astype(np.int8)
        whole = repeated_labels(item, annotator, labels, 40, block_rows=10**9)
        assert whole[0].any() and whole[1].any()
        for block in (1, 7, 1000):
            got = repeated_labels(item, annotator, labels, 40, block_rows=block)
            np.testing.assert_array_equal(got[0], whole[0])
            np.testing.assert_array_equal(got[1], whole[1])

    def test_stripping_an_object_column_keeps_other_values_as_they_are(self):
        from crowd_models._parsing import _strip

        values = pd.Series([" a", 1, None, True, "a ", 1.0, " a", "b"], dtype=object,
                           index=list("pqrstuvw"))
        got = _strip(values)
        assert list(got.index) == list("pqrstuvw")
        assert [got["p"], got["t"], got["v"], got["w"]] == ["a", "a", "a", "b"]
        assert got["q"] == 1 and type(got["q"]) is int and got["r"] is None
        assert got["s"] is True and type(got["u"]) is float

    def test_arrow_text_ids_coded_as_pandas_codes_them(self):
        from crowd_models._parsing import _factorize

        col = pd.concat([pd.Series(["b", "a", "b"], dtype="str"),
                         pd.Series(["c", "a", "007", "7"], dtype="str")], ignore_index=True)
        codes, ids = _factorize(col)
        expected_codes, expected_ids = pd.factorize(col)
        np.testing.assert_array_equal(codes, expected_codes)
        assert ids.equals(pd.Index(expected_ids)) and ids.dtype == col.dtype
        assert list(ids) == ["b", "a", "c", "007", "7"]

    @pytest.mark.parametrize("strip", [False, True])
    def test_text_and_object_columns_parse_alike(self, strip):
        rng = np.random.default_rng(2)
        n = 500
        words = np.array(["yes", "no", " yes", "maybe"])
        df = pd.DataFrame({"item": [f"i{k:03d}" for k in rng.integers(0, 80, n)],
                           "annotator": [f" w{k}" for k in rng.integers(0, 12, n)],
                           "label": words[rng.integers(0, 4, n)]}, dtype="str")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = Annotations.from_frame(df, strip=strip)
            objects = Annotations.from_frame(df.astype(object), strip=strip)
        for name in ("item_idx", "annotator_idx", "labels"):
            np.testing.assert_array_equal(getattr(text, name), getattr(objects, name))
        for name in ("items", "annotators", "classes"):
            assert list(getattr(text, name)) == list(getattr(objects, name))
        assert len(text.classes) == (3 if strip else 4)
