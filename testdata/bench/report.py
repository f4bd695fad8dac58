"""CPython's list scan over dicts for issue 15's report, the baseline of BenchmarkReport.

Builds n rows shaped like the benchmark's inventory (dicts already in memory), then times the
report's work alone: the filter price < 100 and stock > 10, and the sum of the matches' prices.
Prints the median of several runs, in ms.

    python3 testdata/bench/report.py [n]
"""
import random
import statistics
import sys
import time


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = random.Random(1)
    rows = [
        {
            "item_id": "SG%06d" % i,
            "name": "Style %d" % i,
            "description": "Generated frames for the benchmark.",
            "quantity_in_stock": rng.randrange(40),
            "price": float(20 + rng.randrange(180)),
        }
        for i in range(1, n + 1)
    ]
    times = []
    for _ in range(9):
        start = time.perf_counter()
        matched = [r for r in rows if r["price"] < 100 and r["quantity_in_stock"] > 10]
        total = sum([r["price"] for r in matched])
        answer_text = "We have %d styles worth $%d." % (len(matched), total)
        times.append(time.perf_counter() - start)
    print("%s rows: %d matched; median %.1f ms (min %.1f)" % (
        n, len(matched), statistics.median(times) * 1000, min(times) * 1000))
    del answer_text


if __name__ == "__main__":
    main()
