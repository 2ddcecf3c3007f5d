#!/usr/bin/env python3
"""Reference values for package stats, computed with Python's standard library only.

Run:  python3 pkg/stats/testdata/reference.py
The Go tests paste the printed values; this script is how they were obtained. Every
computation here is written independently of the Go code (different formulas where one
exists), so agreement is evidence, not a copy.
"""
import math
import statistics

Z95 = statistics.NormalDist().inv_cdf(0.975)


def wilson(k, n, z=Z95):
    # The score interval as the roots of |p - k/n| = z*sqrt(p(1-p)/n), solved as a quadratic
    # in p: (1 + z²/n) p² - (2k/n + z²/n) p + (k/n)² = 0.
    ph = k / n
    a = 1 + z * z / n
    b = -(2 * ph + z * z / n)
    c = ph * ph
    disc = math.sqrt(b * b - 4 * a * c)
    return ((-b - disc) / (2 * a), (-b + disc) / (2 * a))


M64 = (1 << 64) - 1
MUL = (2549297995355413924 << 64) | 4865540595714422341
INC = (6364136223846793005 << 64) | 1442695040888963407
MASK128 = (1 << 128) - 1


class PCG:
    """Go's math/rand/v2 PCG: a 128-bit LCG with the DXSM output function."""

    def __init__(self, seed1, seed2):
        self.state = (seed1 << 64) | seed2

    def uint64(self):
        self.state = (self.state * MUL + INC) & MASK128
        hi, lo = self.state >> 64, self.state & M64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & M64
        hi ^= hi >> 48
        hi = (hi * (lo | 1)) & M64
        return hi


STREAM = int.from_bytes(b"tribunal", "big")


def bootstrap(items, stat, resamples, level, seed):
    rng = PCG(seed, STREAM)
    n = len(items)
    values = []
    for _ in range(resamples):
        sample = [items[(rng.uint64() * n) >> 64] for _ in range(n)]
        values.append(stat(sample))
    values.sort()
    tail = (1 - level) / 2
    return stat(items), quantile7(values, tail), quantile7(values, 1 - tail)


def quantile7(sorted_values, p):
    # Only used at the bootstrap tails; cross-checked below against statistics.quantiles.
    h = (len(sorted_values) - 1) * p
    lo = math.floor(h)
    if lo >= len(sorted_values) - 1:
        return sorted_values[-1]
    return sorted_values[lo] + (h - lo) * (sorted_values[lo + 1] - sorted_values[lo])


def alpha_nominal(data):
    """data[rater][unit], None for missing. Do from within-unit pairs, De from value counts."""
    units = len(data[0])
    pairable = []
    for u in range(units):
        vals = [row[u] for row in data if row[u] is not None]
        if len(vals) >= 2:
            pairable.append(vals)
    n = sum(len(v) for v in pairable)
    do = 0.0
    for vals in pairable:
        m = len(vals)
        mismatched = sum(1 for i in range(m) for j in range(m) if i != j and vals[i] != vals[j])
        do += mismatched / (m - 1)
    do /= n
    counts = {}
    for vals in pairable:
        for v in vals:
            counts[v] = counts.get(v, 0) + 1
    de = sum(counts[c] * counts[k] for c in counts for k in counts if c != k) / (n * (n - 1))
    return 1 - do / de


def main():
    print("Z95", repr(Z95))
    for k, n in [(81, 263), (15, 148), (0, 20), (1, 29), (7, 10), (52, 100), (70, 100), (600, 1000)]:
        lo, hi = wilson(k, n)
        print(f"wilson95 {k}/{n}: {lo!r} {hi!r}")
    z90 = statistics.NormalDist().inv_cdf(0.95)
    print("Z90", repr(z90))
    lo, hi = wilson(7, 10, z90)
    print(f"wilson90 7/10: {lo!r} {hi!r}")

    data = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0]
    cuts = statistics.quantiles(data, n=20, method="inclusive")
    print("quantiles 5%..95% of", data, [repr(c) for c in cuts])
    print("median", repr(statistics.median(data)))

    # Bootstrap: the mean of 0/1 outcomes (a win rate) over 40 items, 14 ones.
    items = [1.0] * 14 + [0.0] * 26
    mean = lambda xs: sum(xs) / len(xs)
    print("bootstrap mean 14/40 seed 1:", [repr(x) for x in bootstrap(items, mean, 1000, 0.95, 1)])
    print("bootstrap mean 14/40 seed 2:", [repr(x) for x in bootstrap(items, mean, 1000, 0.95, 2)])
    scores = [1.0, 0.5, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.0]
    print("bootstrap mean scores seed 42 r200 90%:", [repr(x) for x in bootstrap(scores, mean, 200, 0.90, 42)])
    spread = [float(i * i % 17) for i in range(30)]
    print("spread", spread)
    for seed in (7, 8):
        print(f"bootstrap mean spread seed {seed} r500:", [repr(x) for x in bootstrap(spread, mean, 500, 0.95, seed)])
    print("bootstrap median spread seed 7 r300:", [repr(x) for x in bootstrap(spread, statistics.median, 300, 0.95, 7)])
    rng = PCG(1, 2)
    print("pcg(1,2) first 3:", [rng.uint64() for _ in range(3)])

    # Krippendorff 2011, section C: four observers, twelve units, nominal alpha 0.743.
    N = None
    k2011 = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
        [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
    ]
    print("alpha k2011", repr(alpha_nominal(k2011)))
    wiki = [
        [N, N, N, N, N, 3, 4, 1, 2, 1, 1, 3, 3, N, 3],
        [1, N, 2, 1, 3, 3, 4, 3, N, N, N, N, N, N, N],
        [N, N, 2, 1, 3, 4, 4, N, 2, 1, 1, 3, 3, N, 4],
    ]
    print("alpha three coders", repr(alpha_nominal(wiki)))
    labels = [
        ["pos", "neg", "neu", N],
        ["pos", "neg", "neu", "pos"],
        ["pos", "neg", "pos", "pos"],
    ]
    print("alpha string labels", repr(alpha_nominal(labels)))
    # Two raters, ten units: ours/reference/tie answers, disagreeing on two units.
    two = [
        ["ours", "ours", "reference", "tie", "ours", "reference", "reference", "ours", "tie", "ours"],
        ["ours", "reference", "reference", "tie", "ours", "reference", "ours", "ours", "tie", "ours"],
    ]
    print("alpha two judges", repr(alpha_nominal(two)))


if __name__ == "__main__":
    main()
