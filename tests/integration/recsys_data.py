#!/usr/bin/env python3
"""Writes a small click log in Criteo's layout plus hist,item (label,I1..I13,C1..C26,hist,item) with a planted model,
pure Python, for test_recsys_models.sh: a first-order weight per token of C1..C4 (what logistic regression
learns), the dot products of 4-wide latent vectors of C5 with C6 and C7 with C8 (what a dot interaction or a cross
learns), and the best match of the item with the history's items in a latent space (what target attention learns;
a sum over the history dilutes it). Histories hold 0 to 30 items (the examples keep 20: longer ones are
truncated), and the test set's histories hold items the training set never shows. The other columns are noise.

    recsys_data.py DIR [--train 30000] [--test 6000]"""
import math, random, sys


def main():
    work = sys.argv[1]
    n_train = int(sys.argv[sys.argv.index("--train") + 1]) if "--train" in sys.argv else 30000
    n_test = int(sys.argv[sys.argv.index("--test") + 1]) if "--test" in sys.argv else 6000
    rng = random.Random(7)
    V, K, ITEMS = 30, 4, 100
    first = [[rng.gauss(0, 0.5) for _ in range(V)] for _ in range(4)]
    lat = [[[rng.gauss(0, 0.7) for _ in range(K)] for _ in range(V)] for _ in range(4)]
    item_vec = [[rng.gauss(0, 1) for _ in range(K)] for _ in range(ITEMS + 50)]
    groups = [rng.sample(range(ITEMS), 10) for _ in range(10)]

    def dot(a, b):
        return sum(x * y for x, y in zip(a, b))

    def row(test):
        c = [rng.randrange(V) for _ in range(26)]
        g = rng.randrange(10)
        hist = [rng.choice(groups[g]) for _ in range(rng.randrange(31))]
        if test and hist and rng.random() < 0.2:
            hist.append(ITEMS + rng.randrange(50))  # an item the training set never shows
        item = rng.choice(groups[g]) if rng.random() < 0.5 else rng.randrange(ITEMS)
        z = sum(first[f][c[f]] for f in range(4))
        z += 0.8 * (dot(lat[0][c[4]], lat[1][c[5]]) + dot(lat[2][c[6]], lat[3][c[7]]))
        z += 3.0 * (max(dot(item_vec[h], item_vec[item]) for h in hist[:20]) / K if hist else 0) - 1.2
        y = 1 if rng.random() < 1 / (1 + math.exp(-z)) else 0
        dense = [str(int(rng.expovariate(0.3))) for _ in range(13)]
        return [str(y)] + dense + [f"{f:02d}{v:04d}" for f, v in enumerate(c)] + \
               ["|".join(f"i{h}" for h in hist), f"i{item}"]

    head = ["label"] + [f"I{i}" for i in range(1, 14)] + [f"C{i}" for i in range(1, 27)] + ["hist", "item"]
    for name, n in (("train", n_train), ("test", n_test)):
        with open(f"{work}/{name}.csv", "w") as f:
            f.write(",".join(head) + "\n")
            for _ in range(n):
                f.write(",".join(row(name == "test")) + "\n")


main()
