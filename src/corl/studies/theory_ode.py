"""Part 1 of `corl.studies.theory`: the ODEs of self-reward and Co-RL (RK4, numpy).

See `corl.studies.theory` for the derivation; Part 2 there runs the same dynamics through
corl's real code and compares.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

CORRECT, WRONG, UNDECIDED = "correct", "wrong", "undecided"


def binomial_pmf(p: np.ndarray, k: int) -> np.ndarray:
    """P(C = c) for C ~ Bin(k, p), c = 0..k.  Shapes: p [...] -> [..., k+1]."""
    p = np.asarray(p, dtype=float)
    return _binomial_coefficients(k) * _powers(p, k) * _powers(1.0 - p, k)[..., ::-1]


def _powers(x: np.ndarray, k: int) -> np.ndarray:
    """x**0 .. x**k by repeated products (about 3x faster than a broadcast power). [...] -> [..., k+1]."""
    out = np.empty((*x.shape, k + 1))
    out[..., 0] = 1.0
    for i in range(1, k + 1):
        out[..., i] = out[..., i - 1] * x
    return out


@functools.cache
def _binomial_coefficients(k: int) -> np.ndarray:
    return np.array([math.comb(k, i) for i in range(k + 1)], dtype=float)


def _group_spread(k: int) -> np.ndarray:
    """sqrt(C(K-C))/K for C = 0..K: the mean |A * dlogpi/dtheta| of a group with C correct."""
    c = np.arange(k + 1)
    return np.sqrt(c * (k - c)) / k


def majority_correct(p: np.ndarray, k: int) -> np.ndarray:
    """V_K(p): probability that the majority of K answers is the correct one.

    A tie (even K, C = K/2) counts 1/2: majority_vote breaks it by first occurrence in
    sample order, and given C = K/2 the first of K exchangeable samples is correct with
    probability exactly 1/2.
    """
    c = np.arange(k + 1)
    wins = np.where(2 * c > k, 1.0, np.where(2 * c == k, 0.5, 0.0))
    return binomial_pmf(p, k) @ wins


def label_signal(p: np.ndarray, k: int) -> np.ndarray:
    """phi_K(p) = 2 V_K(p) - 1: the expected sign of a label drawn from a peer at p."""
    return 2.0 * majority_correct(p, k) - 1.0


def peer_gain(p: np.ndarray, k: int, eta: float = 1.0) -> np.ndarray:
    """q_K(p) = eta p(1-p) E[sqrt(C(K-C))/K]: how fast a correct label moves p."""
    p = np.asarray(p, dtype=float)
    return eta * p * (1.0 - p) * (binomial_pmf(p, k) @ _group_spread(k))


def self_drift(p: np.ndarray, k: int, eta: float = 1.0) -> np.ndarray:
    """dp/dt under self-reward (Proposition 2). Shapes: [...] -> [...]."""
    p = np.asarray(p, dtype=float)
    c = np.arange(k + 1)
    signed = np.sign(c - k / 2) * _group_spread(k)  # a tie (sign 0) has zero expected drift
    return eta * p * (1.0 - p) * (binomial_pmf(p, k) @ signed)


def ring_drift(p: np.ndarray, k: int, eta: float = 1.0) -> np.ndarray:
    """dp_n/dt = q_K(p_n) phi_K(p_{n-1}) on a ring of N agents (Theorem 1 is N = 2).

    Shapes: p [..., N] -> [..., N].
    """
    p = np.asarray(p, dtype=float)
    teacher = np.roll(p, 1, axis=-1)  # teacher[..., n] = p[..., n-1], agent 0 taught by N-1
    return peer_gain(p, k, eta) * label_signal(teacher, k)


def integrate(drift: Callable[[np.ndarray], np.ndarray], p0: np.ndarray, t_end: float, dt: float = 0.1) -> np.ndarray:
    """Classical RK4 from p0 to t_end; returns the trajectory [steps+1, *p0.shape]."""
    p = np.asarray(p0, dtype=float).copy()
    steps = max(1, int(round(t_end / dt)))
    out = np.empty((steps + 1, *p.shape))
    out[0] = p
    for i in range(steps):
        k1 = drift(p)
        k2 = drift(p + 0.5 * dt * k1)
        k3 = drift(p + 0.5 * dt * k2)
        k4 = drift(p + dt * k3)
        p = np.clip(p + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4), 0.0, 1.0)
        out[i + 1] = p
    return out


def outcome(p: float, tol: float = 0.05) -> str:
    """Where a run ended: 'correct' (p > 1 - tol), 'wrong' (p < tol) or 'undecided'."""
    if p > 1.0 - tol:
        return CORRECT
    if p < tol:
        return WRONG
    return UNDECIDED
