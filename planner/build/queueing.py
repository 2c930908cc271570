"""Queueing headroom: turn a TTFT percentile SLO into a utilization cap, before the solve.

Model. A tier's requests arrive as a Poisson stream of rate lambda (requests/s) at one router
that dispatches them to the batch slots of all replicas serving the tier; a request holds one slot
for ``request_s`` (its TTFT floor plus streaming its output). With n slots that is an M/M/n queue
carrying a = lambda x request_s Erlangs. A request's TTFT = wait for a slot + TTFT floor, so the
SLO "TTFT <= T at percentile p" holds when

    P(wait > slack) = C(n, a) x exp(-(n - a) x slack / request_s) <= 1 - p,   slack = T - floor,

with C(n, a) the Erlang C probability of waiting. The fewest slots n* meeting it give the
utilization cap a / n*: tokens/s per replica in the tables = raw tokens/s per replica x cap.
Exponential service overstates the variance of real request times, so the cap is conservative.

Numerics. Erlang C comes from Erlang B = Poisson pmf(n; a) / cdf(n; a), the pmf in log space
(``scipy.special.gammaln``) and the cdf as a regularized incomplete gamma (``gammaincc``): exact
and stable for any n (no factorials, no O(n) recursion); n* is found by a vectorized integer
bisection. The square-root (Halfin-Whitt) staffing n = a + beta x sqrt(a), with beta solving
P(wait > slack) ~ exp(-beta x sqrt(a) x slack / request_s) / (1 + beta Phi(beta) / phi(beta)),
is asymptotically exact for large pools; it brackets the bisection and is tested against it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import special

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

_HALF_LOG_2PI = 0.5 * float(np.log(2.0 * np.pi))


def erlang_c(servers: ArrayLike, erlangs: ArrayLike) -> FloatArray:
    """Probability that an arrival waits in M/M/n with n ``servers`` and load a ``erlangs``.

    1 where a >= n (the queue is unstable: everyone waits).
    """
    n, a = np.broadcast_arrays(
        np.asarray(servers, dtype=np.float64), np.asarray(erlangs, dtype=np.float64)
    )
    out = np.ones(n.shape)
    stable = (a < n) & (n > 0)
    if not np.any(stable):
        return out
    ns, as_ = n[stable], a[stable]
    positive = as_ > 0
    blocking = np.zeros(ns.shape)
    np_, ap = ns[positive], as_[positive]
    # Poisson(a): log pmf(n) = n ln a - a - ln n!; cdf(n) = Q(n + 1, a), the regularized upper
    # incomplete gamma, >= ~1/2 for n > a, so its log is safe.
    log_pmf = np_ * np.log(ap) - ap - special.gammaln(np_ + 1.0)
    blocking[positive] = np.exp(log_pmf - np.log(special.gammaincc(np_ + 1.0, ap)))
    out[stable] = blocking / (1.0 - (as_ / ns) * (1.0 - blocking))
    return out


def wait_exceeds(
    servers: ArrayLike, erlangs: ArrayLike, wait_over_service: ArrayLike
) -> FloatArray:
    """P(wait > t) in M/M/n, t given in units of the mean service time."""
    n, a, x = np.broadcast_arrays(
        np.asarray(servers, dtype=np.float64),
        np.asarray(erlangs, dtype=np.float64),
        np.asarray(wait_over_service, dtype=np.float64),
    )
    c = erlang_c(n, a)
    return np.where(a < n, c * np.exp(-np.maximum(n - a, 0.0) * x), 1.0)


def wait_quantile_s(
    servers: ArrayLike, erlangs: ArrayLike, service_s: ArrayLike, quantile: ArrayLike
) -> FloatArray:
    """The ``quantile`` (0-1) of the wait for a slot, seconds; inf when the queue is unstable."""
    n, a, s, q = np.broadcast_arrays(
        np.asarray(servers, dtype=np.float64),
        np.asarray(erlangs, dtype=np.float64),
        np.asarray(service_s, dtype=np.float64),
        np.asarray(quantile, dtype=np.float64),
    )
    c = erlang_c(n, a)
    tail = 1.0 - q
    with np.errstate(divide="ignore", invalid="ignore"):
        w = s / (n - a) * np.log(c / tail)
    return np.where(a >= n, np.inf, np.where(c <= tail, 0.0, w))


def halfin_whitt_servers(
    erlangs: ArrayLike, wait_over_service: ArrayLike, tail: ArrayLike
) -> FloatArray:
    """Square-root staffing: the (real) slot count a + beta sqrt(a) meeting P(wait > t) <= tail."""
    a, x, eps = np.broadcast_arrays(
        np.asarray(erlangs, dtype=np.float64),
        np.asarray(wait_over_service, dtype=np.float64),
        np.asarray(tail, dtype=np.float64),
    )
    root = np.sqrt(np.maximum(a, 1e-12))

    log_tail = np.log(eps)

    def excess(beta: FloatArray) -> FloatArray:
        # log P(wait > t) - log tail; decreasing in beta. Phi(b) / phi(b) in logs.
        log_ratio = special.log_ndtr(beta) + 0.5 * beta * beta + _HALF_LOG_2PI
        return -np.log1p(beta * np.exp(log_ratio)) - beta * root * x - log_tail

    lo = np.zeros(a.shape)
    hi = np.full(a.shape, 4.0)
    for _ in range(20):
        grow = excess(hi) > 0
        if not np.any(grow):
            break
        hi = np.where(grow, hi * 2.0, hi)
    for _ in range(30):  # beta to ~hi / 1e9: far below one server
        mid = 0.5 * (lo + hi)
        above = excess(mid) > 0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return a + hi * root


def servers_needed(erlangs: ArrayLike, wait_over_service: ArrayLike, tail: ArrayLike) -> FloatArray:
    """Fewest integer slots n with P(wait > t) <= tail (exact Erlang C); 0 where a = 0."""
    a, x, eps = np.broadcast_arrays(
        np.asarray(erlangs, dtype=np.float64),
        np.asarray(wait_over_service, dtype=np.float64),
        np.asarray(tail, dtype=np.float64),
    )
    shape = a.shape
    a, x, eps = a.ravel(), x.ravel(), eps.ravel()

    def ok(n: FloatArray, at: npt.NDArray[np.intp] | slice = slice(None)) -> npt.NDArray[np.bool_]:
        return wait_exceeds(n, a[at], x[at]) <= eps[at]

    # Bracket around square-root staffing (close for large pools), checked and widened where
    # wrong: lo must fail (n <= a always does), hi must pass. Each step evaluates only the
    # elements still open (each element's answer is its own: the others only save work).
    guess = halfin_whitt_servers(a, x, eps)
    slack = np.maximum(2.0, 0.02 * guess)
    lo = np.maximum(np.floor(a), np.floor(guess - slack))
    lo = np.where(ok(lo), np.floor(a), lo)
    hi = np.maximum(np.ceil(guess + slack), lo + 1.0)
    short = np.arange(a.shape[0])
    for _ in range(64):
        short = short[~ok(hi[short], short)]
        if not short.size:
            break
        hi[short] += (hi[short] - lo[short]) + 1.0
    active = np.flatnonzero(hi - lo > 1)
    while active.size:
        mid = np.floor(0.5 * (lo[active] + hi[active]))
        good = ok(mid, active)
        hi[active[good]] = mid[good]
        lo[active[~good]] = mid[~good]
        active = active[hi[active] - lo[active] > 1]
    return np.where(a > 0, hi, 0.0).reshape(shape)


def utilization_cap(
    erlangs: ArrayLike, slack_s: ArrayLike, service_s: ArrayLike, quantile: ArrayLike
) -> FloatArray:
    """Largest average slot occupancy that keeps the wait within ``slack_s`` at ``quantile``.

    a / n* for load a > 0; at zero load the cap is that of a small load (one request's worth), so
    the tables stay finite. Slack <= 0 gives 0 (the SLO cannot be met at any load).
    """
    a, slack, s, q = np.broadcast_arrays(
        np.asarray(erlangs, dtype=np.float64),
        np.asarray(slack_s, dtype=np.float64),
        np.asarray(service_s, dtype=np.float64),
        np.asarray(quantile, dtype=np.float64),
    )
    load = np.where(a > 0, a, 1.0)
    n = servers_needed(load, np.maximum(slack, 0.0) / s, 1.0 - q)
    return np.where(slack > 0, load / n, 0.0)
