#!/usr/bin/env python3
"""Writes the planted sparse set the sparse-model tests train on: 4 classes, about 18 hashed ids of 2^20 per
example (Zipf-like over 400 tokens), each weighted, labelled by a planted linear model (so a logistic regression
can learn it), as DIR/{train,test}.libsvm and the CSV twins DIR/{train,test}.csv (label,tokens,values).

    sparse_data.py DIR [--train 6000] [--test 1000]"""
import random, sys


def main():
    work = sys.argv[1]
    n_train = int(sys.argv[sys.argv.index("--train") + 1]) if "--train" in sys.argv else 6000
    n_test = int(sys.argv[sys.argv.index("--test") + 1]) if "--test" in sys.argv else 1000
    rng = random.Random(11)
    vocab = [rng.randrange(1, 1 << 20) for _ in range(400)]
    weights = {t: [rng.gauss(0, 1) for _ in range(4)] for t in vocab}

    def example():
        toks = sorted({vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)] for _ in range(12)} |
                      {rng.choice(vocab) for _ in range(6)})
        vals = {t: round(rng.uniform(0.5, 1.5), 3) for t in toks}
        score = [sum(vals[t] * weights[t][c] for t in toks) for c in range(4)]
        return max(range(4), key=lambda c: score[c]), toks, vals

    for name, n in (("train", n_train), ("test", n_test)):
        with open(f"{work}/{name}.libsvm", "w") as svm, open(f"{work}/{name}.csv", "w") as csv:
            csv.write("label,tokens,values\n")
            for _ in range(n):
                label, toks, vals = example()
                svm.write(f"{label} " + " ".join(f"{t}:{vals[t]}" for t in toks) + "\n")
                csv.write(f"{label},{' '.join(str(t) for t in toks)},{' '.join(str(vals[t]) for t in toks)}\n")


if __name__ == "__main__":
    main()
