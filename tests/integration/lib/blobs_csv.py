"""blobs_csv.py OUT SEED [WEIGHT]: writes OUT, a CSV of 150 rows of 3 classes (row i is class i % 3) whose 4 features
a..d are drawn around the class (Gaussian, sd 0.8, seeded by SEED), with a column w of WEIGHT before the label
when given: the small set the keep_best and loss-weight tests train on."""
import random, sys
out, seed = sys.argv[1], int(sys.argv[2])
w = sys.argv[3] if len(sys.argv) > 3 else None
random.seed(seed)
with open(out, "w") as f:
    f.write("a,b,c,d," + ("w," if w else "") + "label\n")
    for i in range(150):
        f.write(",".join(f"{random.gauss(i % 3, 0.8):.3f}" for _ in range(4)) + (f",{w}" if w else "") + f",{i % 3}\n")
