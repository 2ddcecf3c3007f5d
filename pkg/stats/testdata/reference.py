#!/usr/bin/env python3
"""Reference values for package stats, computed with Python's standard library only.

Run:  python3 pkg/stats/testdata/reference.py          (readable)
      python3 pkg/stats/testdata/reference.py --json   (what TestReferenceScript reads)
The Go tests paste the printed values, and TestReferenceScript runs this script and
compares everything it computes with the Go code. Every
computation here is written independently of the Go code (different formulas where one
exists), so agreement is evidence, not a copy.
"""
import json
import math
import statistics
import sys

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


def compute():
    """Every reference value, by name; main() prints them, or all as JSON with --json."""
    r = {"z95": Z95, "z90": statistics.NormalDist().inv_cdf(0.95)}
    r["wilson95"] = [[k, n, *wilson(k, n)] for k, n in
                     [(81, 263), (15, 148), (0, 20), (1, 29), (7, 10), (52, 100), (70, 100), (600, 1000)]]
    r["wilson90"] = [[7, 10, *wilson(7, 10, r["z90"])]]

    data = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0]
    r["quantiles"] = {"data": data, "cuts": statistics.quantiles(data, n=20, method="inclusive")}

    # Bootstrap: a win rate (0/1 outcomes), split-tie scores, and a spread of values.
    mean = lambda xs: sum(xs) / len(xs)
    wins = [1.0] * 14 + [0.0] * 26
    scores = [1.0, 0.5, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.0]
    spread = [float(i * i % 17) for i in range(30)]
    r["bootstrap"] = []
    for items, name, stat, resamples, level, seed in [
        (spread, "mean", mean, 500, 0.95, 7),
        (spread, "mean", mean, 500, 0.95, 8),
        (spread, "median", statistics.median, 300, 0.95, 7),
        (wins, "mean", mean, 1000, 0.95, 1),
        (scores, "mean", mean, 200, 0.90, 42),
    ]:
        point, lo, hi = bootstrap(items, stat, resamples, level, seed)
        r["bootstrap"].append({"items": items, "stat": name, "resamples": resamples, "level": level,
                               "seed": seed, "point": point, "lo": lo, "hi": hi})
    rng = PCG(1, 2)
    r["pcg_1_2"] = [rng.uint64() for _ in range(3)]

    # Krippendorff 2011, section C: four observers, twelve units, nominal alpha 0.743.
    N = None
    r["alpha"] = {name: alpha_nominal(d) for name, d in {
        "k2011": [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
            [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
        ],
        "three coders": [
            [N, N, N, N, N, 3, 4, 1, 2, 1, 1, 3, 3, N, 3],
            [1, N, 2, 1, 3, 3, 4, 3, N, N, N, N, N, N, N],
            [N, N, 2, 1, 3, 4, 4, N, 2, 1, 1, 3, 3, N, 4],
        ],
        "string labels": [
            ["pos", "neg", "neu", N],
            ["pos", "neg", "neu", "pos"],
            ["pos", "neg", "pos", "pos"],
        ],
        # Two raters, ten units: ours/reference/tie answers, disagreeing on two units.
        "two judges": [
            ["ours", "ours", "reference", "tie", "ours", "reference", "reference", "ours", "tie", "ours"],
            ["ours", "reference", "reference", "tie", "ours", "reference", "ours", "ours", "tie", "ours"],
        ],
    }.items()}
    return r


def main():
    r = compute()
    if "--json" in sys.argv[1:]:
        print(json.dumps(r))
        return
    print("Z95", repr(r["z95"]), "Z90", repr(r["z90"]))
    for k, n, lo, hi in r["wilson95"]:
        print(f"wilson95 {k}/{n}: {lo!r} {hi!r}")
    for k, n, lo, hi in r["wilson90"]:
        print(f"wilson90 {k}/{n}: {lo!r} {hi!r}")
    print("quantiles 5%..95% of", r["quantiles"]["data"], [repr(c) for c in r["quantiles"]["cuts"]])
    for b in r["bootstrap"]:
        print(f"bootstrap {b['stat']} seed {b['seed']} r{b['resamples']} level {b['level']} over {len(b['items'])} items:",
              repr(b["point"]), repr(b["lo"]), repr(b["hi"]))
    print("pcg(1,2) first 3:", [hex(x) for x in r["pcg_1_2"]])
    for name, a in r["alpha"].items():
        print("alpha", name, repr(a))


if __name__ == "__main__":
    main()
