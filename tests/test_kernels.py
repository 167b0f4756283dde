"""The long-table operation against np.add.at, on every backend it runs on,
with its gradient checked by finite differences and by the adjoint identity."""

import importlib.util

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from crowd_models._kernels import scatter_rows

MODES = ["NUMBA", "FAST_COMPILE"]  # numba loop; NumPy perform
if importlib.util.find_spec("jax") is not None:
    MODES.append("JAX")


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(3)
    # repeated (dst, src) pairs, an output row nothing lands in, unsorted rows
    dst = np.array([2, 0, 2, 2, 4, 0, 1, 4, 2], dtype=np.int32)
    src = np.array([1, 3, 1, 0, 5, 2, 2, 5, 4], dtype=np.int32)
    return rng.normal(size=(6, 3)), dst, src


def _reference(values, dst, src, n_out):
    out = np.zeros((n_out, values.shape[1]))
    np.add.at(out, dst, values[src])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_scatter_rows_sums_like_add_at(table, mode):
    values, dst, src = table
    v = pt.matrix("v")
    if mode == "JAX":
        from crowd_models._kernels import register_jax

        register_jax()
        # JAX compiles for fixed shapes: indices and row count are constants
        out = scatter_rows(v, pt.constant(dst), pt.constant(src), pt.constant(6))
        fn = pytensor.function([v], [out, pt.grad((out * out).sum(), v)], mode=mode)
        got, grad = fn(values)
    else:
        d, s, n = pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
        out = scatter_rows(v, d, s, n)
        fn = pytensor.function([v, d, s, n], [out, pt.grad((out * out).sum(), v)], mode=mode)
        got, grad = fn(values, dst, src, 6)
    ref = _reference(values, dst, src, 6)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)
    assert not got[3].any() and not got[5].any()  # rows nothing lands in
    # d/dv sum(out^2) = 2 * (the adjoint applied to out): rows of out summed back
    np.testing.assert_allclose(grad, _reference(2 * ref, src, dst, 6), atol=1e-13)


def test_gradient_by_finite_differences_and_second_order(table):
    values, dst, src = table
    v = pt.matrix("v")
    out = scatter_rows(v, pt.constant(dst), pt.constant(src), pt.constant(5))
    loss = pt.logsumexp(out, axis=1).sum()
    g = pt.grad(loss, v)
    direction = pt.matrix("p")
    hvp = pt.grad((g * direction).sum(), v)  # the gradient's own gradient
    f = pytensor.function([v], loss)
    fg = pytensor.function([v], g)
    fh = pytensor.function([v, direction], hvp)
    rng = np.random.default_rng(4)
    p = rng.normal(size=values.shape)
    h = 1e-6
    numeric = (f(values + h * p) - f(values - h * p)) / (2 * h)
    assert np.sum(fg(values) * p) == pytest.approx(numeric, rel=1e-7)
    numeric_hvp = (fg(values + h * p) - fg(values - h * p)) / (2 * h)
    np.testing.assert_allclose(fh(values, p), numeric_hvp, atol=1e-6)


def test_pushforward_is_the_operation_on_the_tangent(table):
    values, dst, src = table
    v, t = pt.matrix("v"), pt.matrix("t")
    out = scatter_rows(v, pt.constant(dst), pt.constant(src), pt.constant(5))
    jvp = pytensor.gradient.pushforward(out, v, t)
    tangent = np.random.default_rng(5).normal(size=values.shape)
    np.testing.assert_allclose(pytensor.function([v, t], jvp)(values, tangent),
                               _reference(tangent, dst, src, 5), atol=1e-14)


@pytest.mark.parametrize("args, match", [
    ((pt.vector(), pt.ivector(), pt.ivector(), pt.iscalar()), "values must be a matrix"),
    ((pt.matrix(), pt.vector(), pt.ivector(), pt.iscalar()), "dst must be a vector of integers"),
    ((pt.matrix(), pt.ivector(), pt.imatrix(), pt.iscalar()), "src must be a vector of integers"),
    ((pt.matrix(), pt.ivector(), pt.ivector(), pt.ivector()), "n_out must be an integer scalar"),
])
def test_scatter_rows_refuses_wrong_types(args, match):
    with pytest.raises(TypeError, match=match):
        scatter_rows(*args)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_scatter_rows_refuses_indices_outside_the_tables(table, mode):
    # codes set by hand with pm.set_data reach the loop unvalidated: an index
    # beyond either table (or a negative one, which NumPy would wrap) must raise
    values, dst, src = table
    v, d, s, n = pt.matrix("v"), pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
    fn = pytensor.function([v, d, s, n], scatter_rows(v, d, s, n), mode=mode)
    fn(values, dst, src, 5)  # the highest valid output row is 4
    for bad_dst, bad_src, rows in ((dst, src, 4), (dst, src + 1, 5),
                                   (dst - 1, src, 5), (dst, src - 1, 6)):
        with pytest.raises(IndexError, match="outside its table"):
            fn(values, bad_dst, bad_src, rows)
    with pytest.raises(ValueError, match="differ in length"):
        fn(values, dst, src[:-1], 5)


@pytest.mark.parametrize("n_entries, columns", [(0, 64), (1, 64), (400, 64), (400, 301)])
def test_wide_values_add_in_rounds_to_the_same_sums_as_add_at(n_entries, columns):
    # from _WIDE columns (a vectorised graph's draws side by side) perform adds in
    # rounds; each output row must still receive its entries in table order, so
    # the sums are equal to np.add.at's bit for bit, not just close
    rng = np.random.default_rng(n_entries + columns)
    values = rng.normal(size=(9, columns)) * np.exp(4 * rng.normal(size=(9, columns)))
    dst = rng.integers(0, 7, n_entries).astype(np.int32)  # many repeats, rows left empty
    dst[: n_entries // 2] = 3  # one row with half the entries: as many rounds
    src = rng.integers(0, 9, n_entries).astype(np.int32)
    v, d, s, n = pt.matrix("v"), pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
    fn = pytensor.function([v, d, s, n], scatter_rows(v, d, s, n), mode="FAST_COMPILE")
    assert np.array_equal(fn(values, dst, src, 8), _reference(values, dst, src, 8))


def test_draws_vectorise_as_columns_of_one_operation(table):
    from pytensor.graph.replace import vectorize_graph
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.blockwise import Blockwise

    values, dst, src = table
    v = pt.matrix("v")
    out = scatter_rows(pt.exp(v), pt.constant(dst), pt.constant(src), pt.constant(6))
    drawn = pt.tensor4("drawn")  # two batch axes: (chain, draw, row, column)
    batched = vectorize_graph(out, {v: drawn})
    assert not any(isinstance(x.owner.op, Blockwise) for x in ancestors([batched]) if x.owner)
    draws = np.random.default_rng(6).normal(size=(2, 3, *values.shape))
    got = pytensor.function([drawn], batched, mode="FAST_COMPILE")(draws)
    for c in range(2):
        for k in range(3):
            assert np.array_equal(got[c, k], _reference(np.exp(draws[c, k]), dst, src, 6))


def test_indices_batched_through_a_shape_must_repeat_across_draws(table):
    # vectorize_graph broadcasts a batched variable's shape over the batch, so
    # indices computed from one (the families' (annotator, label) pair) arrive
    # batched: the operation takes the first draw's and checks the others
    from pytensor.graph.replace import vectorize_graph

    values, dst, src = table
    v, s = pt.matrix("v"), pt.ivector("s")
    out = scatter_rows(v, pt.constant(dst), s + 0 * v.shape[1], pt.constant(6))
    drawn, drawn_src = pt.tensor3("drawn"), pt.imatrix("drawn_src")
    fn = pytensor.function([drawn, drawn_src], vectorize_graph(out, {v: drawn, s: drawn_src}),
                           mode="FAST_COMPILE")
    draws = np.random.default_rng(7).normal(size=(4, *values.shape))
    got = fn(draws, np.tile(src, (4, 1)))
    for k in range(4):
        assert np.array_equal(got[k], _reference(draws[k], dst, src, 6))
    other = np.tile(src, (4, 1))
    other[2, 0] = (src[0] + 1) % 6
    with pytest.raises(AssertionError, match="the draws' index arrays differ"):
        fn(draws, other)
