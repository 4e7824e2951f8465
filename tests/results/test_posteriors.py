"""The Bayesian signed-rank posteriors: the same probabilities, cheaper.

``across.bayes_signed_ranks`` weighs several difference vectors by one set
of draws, computes w' M w from prefix sums instead of a matrix product, and
keeps each posterior by its inputs inside a stored answer's computation
(``answer_cache.posteriors``): what it returns is the matrix-product
definition's, draw for draw.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from benchdb.results import across, answer_cache


def by_matrix(d, rope, prior=across.PRIOR_WEIGHT, samples=4000, seed=7):
    """The definition (baycomp's): w' M w with the pair matrices."""
    z = np.concatenate(([0.0], np.asarray(d, dtype=float)))
    sums = z[:, None] + z[None, :]
    below = (sums < -2 * rope) + 0.5 * (sums == -2 * rope)
    above = (sums > 2 * rope) + 0.5 * (sums == 2 * rope)
    weights = np.ones(z.size)
    weights[0] = prior
    w = np.random.RandomState(seed).dirichlet(weights, samples)
    lo = ((w @ below) * w).sum(axis=1)
    hi = ((w @ above) * w).sum(axis=1)
    if rope > 0:
        mass = np.stack((lo, 1.0 - lo - hi, hi), axis=1)
    else:
        mass = np.stack((1.0 - hi, np.zeros(samples), hi), axis=1)
    p = np.bincount(np.argmax(mass, axis=1), minlength=3) / samples
    return tuple(float(x) for x in p)


@pytest.mark.parametrize("n", [1, 2, 6, 17, 60])
@pytest.mark.parametrize("rope", [0.0, 0.05, 1.0])
def test_the_posterior_is_the_matrix_definitions(n, rope):
    rng = np.random.default_rng(n)
    continuous = rng.normal(0.02, 0.1, n)
    # Ties, and sums landing exactly on the bounds (half a pair each).
    tied = np.round(rng.normal(0.0, 2.0, n))
    for d in (continuous, tied):
        assert across.bayes_signed_rank(d, rope, samples=4000, seed=7) == by_matrix(
            d, rope
        )


def test_several_vectors_on_one_set_of_draws_are_each_alone():
    rng = np.random.default_rng(3)
    many = [rng.normal(0.0, 0.1, 12) for _ in range(4)] + [rng.normal(0, 1, 5)]
    together = across.bayes_signed_ranks(many, 0.05, samples=3000, seed=11)
    alone = [across.bayes_signed_rank(d, 0.05, samples=3000, seed=11) for d in many]
    assert together == alone


def test_the_null_distribution_is_the_recurrences():
    for n in (1, 2, 5, 30, 120):
        p = np.zeros(n * (n + 1) // 2 + 1)
        p[0] = 1.0
        for i in range(1, n + 1):
            shifted = np.zeros_like(p)
            shifted[i:] = p[:-i]
            p = (p + shifted) / 2.0
        assert np.array_equal(across.signed_rank_null(n), p)


@pytest.mark.django_db
def test_a_stored_answers_computation_keeps_each_posterior():
    d = np.random.default_rng(5).normal(0.0, 0.1, 9)
    first = across.bayes_signed_rank(d, 0.05, samples=2000)
    token = answer_cache._computing.set(True)
    try:
        assert across.bayes_signed_rank(d, 0.05, samples=2000) == first
        with mock.patch.object(across, "_posteriors", side_effect=AssertionError):
            # Kept by its inputs: read, not drawn again.
            assert across.bayes_signed_rank(d, 0.05, samples=2000) == first
            with pytest.raises(AssertionError):
                across.bayes_signed_rank(d, 0.06, samples=2000)
    finally:
        answer_cache._computing.reset(token)


@pytest.mark.django_db
def test_a_posterior_kept_by_other_code_is_not_read():
    # The key holds a digest of the code that draws: after a change to it
    # (here, another digest) the kept row is not read, it is drawn again.
    d = np.random.default_rng(6).normal(0.0, 0.1, 9)
    token = answer_cache._computing.set(True)
    try:
        first = across.bayes_signed_rank(d, 0.05, samples=2000)
        with (
            mock.patch.object(across, "_posterior_code", return_value=" changed"),
            mock.patch.object(across, "_posteriors", side_effect=AssertionError),
            pytest.raises(AssertionError),
        ):
            across.bayes_signed_rank(d, 0.05, samples=2000)
        assert across.bayes_signed_rank(d, 0.05, samples=2000) == first
    finally:
        answer_cache._computing.reset(token)


def test_posteriors_drawn_together_are_each_drawn_alone():
    """``drawn_together``: the pairs' posteriors drawn ahead, one set of
    draws per length, and ``two_settings`` inside says what it says alone."""
    rng = np.random.default_rng(8)
    many = [
        rng.normal(0.0, 0.1, 9),
        rng.normal(0.05, 0.1, 9),
        rng.normal(0.0, 0.1, 4),
        rng.normal(0.0, 0.1, 11),
    ]
    alone = [across.two_settings(d, True) for d in many]
    sets = []
    drawn = across._posteriors

    def counted(vectors, *args):
        sets.append(len(vectors))
        return drawn(vectors, *args)

    with mock.patch.object(across, "_posteriors", side_effect=counted):
        with across.drawn_together(many):
            together = [across.two_settings(d, True) for d in many]
    assert together == alone
    assert together[0]["probabilities"] != together[1]["probabilities"]
    # The two of nine systems on one set of draws, eleven on its own, four
    # (too few systems for a posterior) on none; nothing drawn again inside.
    assert sorted(sets) == [1, 2]


@pytest.mark.django_db
def test_a_kept_posterior_read_is_marked_used():
    """Read by a computation, a kept posterior is not dropped as unused by
    the refresh (``results_posterior.used``) and drawn again."""
    from django.db import connection

    d = np.random.default_rng(7).normal(0.0, 0.1, 9)
    token = answer_cache._computing.set(True)
    try:
        first = across.bayes_signed_rank(d, 0.05, samples=2000)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE results_posterior SET used = now() - interval '8 days'"
            )
        with mock.patch.object(across, "_posteriors", side_effect=AssertionError):
            assert across.bayes_signed_rank(d, 0.05, samples=2000) == first
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), count(*) FILTER (WHERE used < now() - "
                "interval '1 day') FROM results_posterior"
            )
            assert cursor.fetchone() == (1, 0)
    finally:
        answer_cache._computing.reset(token)
