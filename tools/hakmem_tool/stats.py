"""Statistics of the results, and the A/B decision.

The A/B decision works on pairs: each A run is paired with a B run made right before or
after it (order random within the pair), and each pair gives one log ratio
d = ln(B / A) (for a time, ln(A / B): positive d means B is better). Drift of the machine
over minutes cancels within a pair. What is left is a burst that hits one run of a pair
(another process takes the core for a while): a few pairs with |d| of 0.2 - 0.5 among
pairs of 0.02. So the decision:

  - leaves out the pairs with |d| > 3 x 1.4826 x median |d| (three robust standard
    deviations from no difference). The rule looks at |d| only, so when A and B do not
    differ the signs of the pairs kept are still fair coins and the test below stays exact;
  - tests the pairs kept with the Wilcoxon signed-rank test (exact null distribution,
    midranks for ties), two-sided p;
  - estimates the ratio of geometric means by Hodges-Lehmann (the median of the Walsh
    averages (d_i + d_j) / 2, i <= j), with its distribution-free confidence interval from
    the same null distribution, so p < alpha exactly when the interval leaves out 1.

Chosen by simulation (tests/test_ab_decision.py's noise: drift, 2% noise per run, 10% of
runs 20-50% slow; 400 trials of 20 pairs, GO = gain >= 1% and p < 0.05): A/A gave GO in
1.8% (paired t on d), 7.0% (bootstrap of pairs), 2.8% (Wilcoxon), 2.8% (Wilcoxon on the
pairs kept); a true +3% gave GO in 22.8%, 27.0%, 64.0% and 91.0%. The bursts make the
t-test and the bootstrap lose the effect (they set the spread), and the bootstrap
understates its interval with 20 pairs; ranks alone still let each burst weigh most."""

import math
import statistics

DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD_PCT = 1.0
EXACT_WILCOXON_LIMIT = 60  # pairs; beyond, the normal approximation with a tie correction
OUTLIER_SCALES = 3.0       # a pair is left out beyond this many robust standard deviations
MAD_TO_SIGMA = 1.4826      # median |x| of a normal distribution centred on 0, times this, is sigma


def mean(xs):
    return sum(xs) / len(xs)


def median(xs):
    return statistics.median(xs)


def stddev(xs):
    """Sample standard deviation (n - 1 in the denominator); 0 for fewer than 2 values."""
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def cv(xs):
    """Coefficient of variation: stddev / mean."""
    return stddev(xs) / mean(xs)


def geomean(xs):
    return math.exp(mean([math.log(x) for x in xs]))


def describe(xs):
    return {"n": len(xs), "mean": mean(xs), "median": median(xs), "min": min(xs),
            "max": max(xs), "stddev": stddev(xs), "cv": cv(xs)}


def log_ratios(a, b, higher_is_better=True):
    """One log ratio per pair (a[i], b[i]); positive when B is the better one."""
    if higher_is_better:
        return [math.log(y / x) for x, y in zip(a, b)]
    return [math.log(x / y) for x, y in zip(a, b)]


def midranks(values):
    """Ranks 1..n of values, ties sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def signed_rank_distribution(doubled_ranks):
    """counts[s]: how many of the 2^n sign choices give a positive-rank sum of s / 2
    (ranks doubled so that midranks stay integers)."""
    counts = [1] + [0] * sum(doubled_ranks)
    reach = 0
    for rank in doubled_ranks:
        reach += rank
        for total in range(reach, rank - 1, -1):
            counts[total] += counts[total - rank]
    return counts


def wilcoxon_signed_rank(d):
    """Two-sided p-value of the Wilcoxon signed-rank test that d is centred on 0. Zeros
    are dropped; exact for up to EXACT_WILCOXON_LIMIT nonzero values."""
    nonzero = [x for x in d if x != 0]
    n = len(nonzero)
    if n == 0:
        return 1.0
    ranks = midranks([abs(x) for x in nonzero])
    doubled = [round(2 * r) for r in ranks]
    positive = sum(r for r, x in zip(doubled, nonzero) if x > 0)
    if n <= EXACT_WILCOXON_LIMIT:
        counts = signed_rank_distribution(doubled)
        total = 2 ** n
        upper = sum(counts[positive:]) / total
        lower = sum(counts[:positive + 1]) / total
        return min(1.0, 2 * min(upper, lower))
    expected = sum(doubled) / 2
    variance = sum(r * r for r in doubled) / 4
    z = (abs(positive - expected) - 0.5) / math.sqrt(variance)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def walsh_averages(d):
    return sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))


def hodges_lehmann(d, level=1 - DEFAULT_ALPHA):
    """(estimate, low, high): the median of the Walsh averages and its distribution-free
    confidence interval [w_k, w_(M+1-k)], k the largest with P(W+ < k) <= (1 - level) / 2
    under the exact null distribution of the signed-rank statistic W+ (no ties).
    With too few values for that level, the interval is the whole range of the averages."""
    walsh = walsh_averages(d)
    count = len(walsh)
    n = len(d)
    tail = (1 - level) / 2
    if n <= EXACT_WILCOXON_LIMIT:
        counts = signed_rank_distribution([2 * r for r in range(1, n + 1)])
        total, k, below = 2 ** n, 0, 0
        while k < count and below + counts[2 * k] <= tail * total:
            below += counts[2 * k]
            k += 1
    else:
        z = statistics.NormalDist().inv_cdf(1 - tail)
        k = max(0, int(math.floor(count / 2 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))))
    k = max(k, 1)
    return median(walsh), walsh[k - 1], walsh[count - k]


def verdict(gain_value, p, ci_high, threshold, alpha=DEFAULT_ALPHA):
    """GO: gain >= threshold and p < alpha.
    NO-GO: gain < threshold and either the difference is real (p < alpha) or even the
    upper end of the confidence interval stays below the threshold.
    INCONCLUSIVE: everything else (more runs needed). Returns (verdict, reason)."""
    if gain_value >= threshold and p < alpha:
        return "GO", (f"gain {gain_value:+.2%} >= threshold {threshold:+.2%} "
                      f"and p = {p:.3g} < {alpha}")
    if gain_value < threshold and p < alpha:
        return "NO-GO", f"gain {gain_value:+.2%} < threshold {threshold:+.2%} (p = {p:.3g})"
    if gain_value < threshold and ci_high < threshold:
        return "NO-GO", (f"gain {gain_value:+.2%} < threshold {threshold:+.2%} and the CI's upper "
                         f"bound {ci_high:+.2%} is below it")
    if gain_value >= threshold:
        return "INCONCLUSIVE", f"gain {gain_value:+.2%} but p = {p:.3g} >= {alpha}: could be noise"
    return "INCONCLUSIVE", (f"gain {gain_value:+.2%} not significant (p = {p:.3g}) and the CI "
                            f"reaches {ci_high:+.2%}: more runs needed")


def outlier_limit(d, scales=OUTLIER_SCALES):
    """|d| beyond which a pair is left out; None when the median |d| is 0 (keep all)."""
    scale = MAD_TO_SIGMA * median([abs(x) for x in d])
    return scales * scale if scale > 0 else None


def paired_compare(a, b, threshold, higher_is_better=True, alpha=DEFAULT_ALPHA):
    """The decision on pairs (a[i], b[i]) and everything its report needs. The gain is the
    Hodges-Lehmann ratio of B over A minus 1 (+0.05: B is 5% better: 5% more throughput,
    or 5% faster for a time); geomean_gain is the plain ratio of geometric means."""
    d = log_ratios(a, b, higher_is_better)
    limit = outlier_limit(d)
    kept = [x for x in d if limit is None or abs(x) <= limit]
    estimate, low, high = hodges_lehmann(kept, 1 - alpha)
    p = wilcoxon_signed_rank(kept)
    g = math.expm1(estimate)
    label, reason = verdict(g, p, math.expm1(high), threshold, alpha)
    exact = len([x for x in kept if x]) <= EXACT_WILCOXON_LIMIT
    return {"a": describe(a), "b": describe(b), "pairs": len(d), "log_ratios": d,
            "outlier_limit": limit,
            "left_out": [i for i, x in enumerate(d) if limit is not None and abs(x) > limit],
            "gain": g, "ci": [math.expm1(low), math.expm1(high)],
            "geomean_gain": math.expm1(mean(d)),
            "ci_method": f"Hodges-Lehmann, distribution-free {1 - alpha:.0%} interval",
            "p_value": p, "test": "Wilcoxon signed-rank test on the paired log ratios, "
            + ("exact" if exact else "normal approximation"),
            "threshold": threshold, "alpha": alpha, "verdict": label, "reason": reason}
