"""The long-table operation against np.add.at, on every backend it runs on,
with its gradient checked by finite differences and by the adjoint identity;
the summed-out true label against scipy's log-sum-exp and softmax of the same
sums, with its gradients (first and second order) by finite differences."""

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


# ------------------------------------------------- the summed-out true label


def _truth_reference(per_pair, log_prior, dst, src, n_out):
    """Brute force: the joint by np.add.at, then scipy's log-sum-exp and softmax."""
    from scipy.special import logsumexp, softmax

    joint = _reference(per_pair, dst, src, n_out) + log_prior
    with np.errstate(invalid="ignore"):
        return logsumexp(joint, axis=1), softmax(joint, axis=1)


@pytest.fixture(scope="module")
def truth_table(table):
    per_pair, dst, src = table
    per_pair = per_pair.copy()
    per_pair[5, 2] = -np.inf  # a probability of 0 (a spammer's label it never gives)
    rng = np.random.default_rng(8)
    return per_pair, dst, src, rng.normal(size=3), rng.normal(size=(6, 3))


def _truth_graph(shared, n_out, mode):
    """(inputs, [total, prob, d sum(w * total)/d (per_pair, prior), the same of
    sum(w * total) + sum(W * prob)]); JAX gets the indices as constants."""
    from crowd_models._kernels import summed_out_truth

    v, w, big_w = pt.matrix("v"), pt.vector("w"), pt.matrix("W")
    prior = pt.vector("prior") if shared else pt.matrix("prior")
    if mode == "JAX":
        dst, src, n = (pt.constant(x) for x in (_TRUTH_DST, _TRUTH_SRC, np.int32(n_out)))
        inputs = [v, prior, w, big_w]
    else:
        dst, src, n = pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
        inputs = [v, prior, dst, src, n, w, big_w]
    total, prob = summed_out_truth(v, prior, dst, src, n)
    first = (w * total).sum()
    both = first + (big_w * prob).sum()
    return inputs, [total, prob, *pt.grad(first, [v, prior]), *pt.grad(both, [v, prior])]


_TRUTH_DST = np.array([2, 0, 2, 2, 4, 0, 1, 4, 2], dtype=np.int32)
_TRUTH_SRC = np.array([1, 3, 1, 0, 5, 2, 2, 5, 4], dtype=np.int32)


@pytest.mark.parametrize("shared", [True, False], ids=["one prior", "a prior per item"])
@pytest.mark.parametrize("mode", MODES)
def test_summed_out_truth_against_brute_force(truth_table, mode, shared):
    per_pair, dst, src, one_prior, item_prior = truth_table
    assert np.array_equal(dst, _TRUTH_DST) and np.array_equal(src, _TRUTH_SRC)
    if mode == "JAX":
        from crowd_models._kernels import register_jax

        register_jax()
    prior = one_prior if shared else item_prior
    inputs, outputs = _truth_graph(shared, 6, mode)
    fn = pytensor.function(inputs, outputs, mode=mode)
    rng = np.random.default_rng(9)
    w, big_w = rng.normal(size=6), rng.normal(size=(6, 3))
    data = () if mode == "JAX" else (dst, src, 6)
    total, prob, g_pairs, g_prior, g2_pairs, g2_prior = (
        np.asarray(x) for x in fn(per_pair, prior, *data, w, big_w))
    ref_total, ref_prob = _truth_reference(per_pair, prior, dst, src, 6)
    np.testing.assert_allclose(total, ref_total, rtol=1e-14)
    np.testing.assert_allclose(prob, ref_prob, rtol=1e-13, atol=1e-15)
    assert prob[4, 2] == 0  # item 4's labels all come from the pair of probability 0
    # rows nothing lands in: the prior alone
    from scipy.special import logsumexp

    np.testing.assert_allclose(total[[3, 5]], logsumexp(np.broadcast_to(prior, (6, 3)),
                                                        axis=1)[[3, 5]], rtol=1e-14)

    # gradients by central differences (the -inf entry held fixed)
    def objective(pp, pr, with_prob):
        t, p = _truth_reference(pp, pr, dst, src, 6)
        return np.sum(w * t) + (np.sum(big_w * p) if with_prob else 0.0)

    h, direction = 1e-6, np.random.default_rng(10)
    for with_prob, (gp, gq) in ((False, (g_pairs, g_prior)), (True, (g2_pairs, g2_prior))):
        dp = direction.normal(size=per_pair.shape) * np.isfinite(per_pair)
        dq = direction.normal(size=np.shape(prior))
        finite = np.where(np.isfinite(per_pair), per_pair, -1e300)
        numeric = (objective(finite + h * dp, prior + h * dq, with_prob)
                   - objective(finite - h * dp, prior - h * dq, with_prob)) / (2 * h)
        analytic = np.sum(np.where(np.isfinite(per_pair), gp, 0) * dp) + np.sum(gq * dq)
        assert analytic == pytest.approx(numeric, rel=1e-7)


@pytest.mark.parametrize("shared", [True, False], ids=["one prior", "a prior per item"])
def test_summed_out_truth_second_order_by_finite_differences(truth_table, shared):
    # a sampler's gradient is TruthPullback; its own gradient (Hessian-vector
    # products, a Laplace approximation) must hold as well
    from crowd_models._kernels import summed_out_truth

    per_pair, dst, src, one_prior, item_prior = truth_table
    per_pair = np.where(np.isfinite(per_pair), per_pair, -3.0)
    prior0 = one_prior if shared else item_prior
    v = pt.matrix("v")
    prior = pt.vector("prior") if shared else pt.matrix("prior")
    total, _ = summed_out_truth(v, prior, pt.constant(dst), pt.constant(src), pt.constant(6))
    weights = np.random.default_rng(11).normal(size=6)
    grads = pt.grad((weights * total).sum(), [v, prior])
    p, q = pt.matrix("p"), (pt.vector if shared else pt.matrix)("q")
    hvp = pt.grad((grads[0] * p).sum() + (grads[1] * q).sum(), [v, prior])
    fg = pytensor.function([v, prior], grads, mode="FAST_COMPILE")
    fh = pytensor.function([v, prior, p, q], hvp, mode="FAST_COMPILE")
    rng = np.random.default_rng(12)
    dp, dq = rng.normal(size=per_pair.shape), rng.normal(size=np.shape(prior0))
    h = 1e-6
    plus, minus = fg(per_pair + h * dp, prior0 + h * dq), fg(per_pair - h * dp, prior0 - h * dq)
    for got, up, down in zip(fh(per_pair, prior0, dp, dq), plus, minus, strict=True):
        np.testing.assert_allclose(got, (up - down) / (2 * h), atol=1e-7)


def test_summed_out_truth_gradient_is_one_pass():
    # what nutpie compiles: the operation (its posterior output) and its
    # pullback, without a log-sum-exp's or a sum's reductions or a scatter
    from pytensor.tensor.elemwise import CAReduce

    from crowd_models._kernels import ScatterRows, SummedOutTruth, TruthPullback, summed_out_truth

    v, prior = pt.matrix("v"), pt.vector("prior")
    d, s, n = pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
    total, _ = summed_out_truth(v, prior, d, s, n)
    fn = pytensor.function([v, prior, d, s, n], pt.grad(total.sum(), [v, prior]), mode="NUMBA")
    ops = [type(node.op) for node in fn.maker.fgraph.apply_nodes]
    assert ops.count(TruthPullback) == 1 and ops.count(SummedOutTruth) == 1
    assert ScatterRows not in ops and not any(issubclass(op, CAReduce) for op in ops)


def test_summed_out_truth_refuses_wrong_inputs(truth_table):
    from crowd_models._kernels import SummedOutTruth, summed_out_truth

    per_pair, dst, src, _, item_prior = truth_table
    d, s, n = pt.ivector("d"), pt.ivector("s"), pt.iscalar("n")
    with pytest.raises(TypeError, match="per_pair must be a matrix"):
        summed_out_truth(pt.vector(), pt.vector(), d, s, n)
    with pytest.raises(TypeError, match="src must be a vector of integers"):
        summed_out_truth(pt.matrix(), pt.vector(), d, pt.vector(), n)
    with pytest.raises(TypeError, match="one row of static length 1"):
        SummedOutTruth(shared_prior=True)(pt.matrix(), pt.matrix(), d, s, n)
    for mode in ("NUMBA", "FAST_COMPILE"):
        v, prior = pt.matrix("v"), pt.matrix("prior")
        fn = pytensor.function([v, prior, d, s, n], summed_out_truth(v, prior, d, s, n)[0],
                               mode=mode)
        with pytest.raises(ValueError, match="log_prior has the wrong number of rows"):
            fn(per_pair, item_prior[:5], dst, src, 6)
        for bad_dst, bad_src in ((dst, src + 1), (dst - 1, src)):  # pair 6 of 6; item -1
            with pytest.raises(IndexError, match="outside its table"):
                fn(per_pair, item_prior, bad_dst, bad_src, 6)


def test_summed_out_truth_over_draws_is_the_separate_operations(truth_table):
    from pytensor.graph.replace import vectorize_graph
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.blockwise import Blockwise

    from crowd_models._kernels import ScatterRows, SummedOutTruth, summed_out_truth

    per_pair, dst, src, one_prior, _ = truth_table
    v, prior = pt.matrix("v"), pt.vector("prior")
    outs = summed_out_truth(v, prior, pt.constant(dst), pt.constant(src), pt.constant(6))
    drawn, drawn_prior = pt.tensor3("drawn"), pt.matrix("drawn_prior")
    batched = vectorize_graph(list(outs), {v: drawn, prior: drawn_prior})
    # one pass over the table for all draws, not a loop over them
    assert not any(isinstance(x.owner.op, Blockwise)
                   and isinstance(x.owner.op.core_op, (ScatterRows, SummedOutTruth))
                   for x in ancestors(batched) if x.owner)
    rng = np.random.default_rng(13)
    draws = per_pair + rng.normal(size=(4, *per_pair.shape))
    priors = one_prior + rng.normal(size=(4, 3))
    got = pytensor.function([drawn, drawn_prior], batched, mode="FAST_COMPILE")(draws, priors)
    for k in range(4):
        ref = _truth_reference(draws[k], priors[k], dst, src, 6)
        np.testing.assert_allclose(got[0][k], ref[0], rtol=1e-14)
        np.testing.assert_allclose(got[1][k], ref[1], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("mode", ["NUMBA", "FAST_COMPILE"])
def test_summed_out_truth_of_an_impossible_item_is_minus_infinity(truth_table, mode):
    # where a sampler strays to a probability of 0 for every class of an item, the
    # log-likelihood is -inf and the posterior nan (as pt.logsumexp and the
    # softmax give), not an exception: the sampler then rejects the step
    per_pair, dst, src, one_prior, _ = truth_table
    inputs, outputs = _truth_graph(True, 6, mode)
    fn = pytensor.function(inputs, outputs, mode=mode)  # the brute-force test's function
    prior = one_prior.copy()
    prior[:2] = -np.inf  # only class 2 possible, and item 4's labels rule it out
    with np.errstate(invalid="ignore"):
        total, prob = fn(per_pair, prior, dst, src, 6, np.ones(6), np.ones((6, 3)))[:2]
    assert total[4] == -np.inf and np.isnan(prob[4]).all()
    ref_total, ref_prob = _truth_reference(per_pair, prior, dst, src, 6)
    np.testing.assert_allclose(total, ref_total, rtol=1e-14)
    np.testing.assert_allclose(prob, ref_prob, rtol=1e-13, atol=1e-15)
