"""The picture of bench/endless (#28) as an SVG written with the standard library only (no matplotlib here): the
larger ps's RSS (top) and the chief's merged rolling AUC (bottom) over time, one line per run."""
from xml.sax.saxutils import escape

COLORS = {"unbounded": "#d62728", "capped": "#1f77b4", "admitted": "#2ca02c"}
W, H, LEFT, RIGHT, TOP, GAP, PANEL = 900, 600, 70, 150, 40, 60, 220


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering lo .. hi."""
    span = (hi - lo) or 1.0
    raw = span / n
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 10 ** -len(str(int(1 / raw)))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    first = int(lo / step) * step
    return [first + i * step for i in range(n + 3) if lo <= first + i * step <= hi + 1e-9]


def panel(out, top, series, label, y_lo, y_hi, x_max, ref=None):
    """One panel at y offset top: axes, ticks, label and a polyline per (name, [(x, y)])."""
    def px(x):
        return LEFT + (W - LEFT - RIGHT) * x / (x_max or 1)

    def py(y):
        return top + PANEL - PANEL * (y - y_lo) / ((y_hi - y_lo) or 1)
    out.append(f'<rect x="{LEFT}" y="{top}" width="{W - LEFT - RIGHT}" height="{PANEL}" fill="none" stroke="#444"/>')
    for t in nice_ticks(y_lo, y_hi):
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="11">{t:g}</text>')
    for t in nice_ticks(0, x_max):
        out.append(f'<text x="{px(t):.1f}" y="{top + PANEL + 15}" text-anchor="middle" font-size="11">{t:g}</text>')
    out.append(f'<text x="{LEFT}" y="{top - 8}" font-size="13">{escape(label)}</text>')
    if ref is not None:
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(ref):.1f}" y2="{py(ref):.1f}" stroke="#888" '
                   f'stroke-dasharray="5,4"/><text x="{W - RIGHT + 6}" y="{py(ref) + 4:.1f}" font-size="11">'
                   f'Bayes {ref:.4f}</text>')
    for name, pts in series.items():
        if pts:
            path = " ".join(f"{px(x):.1f},{py(min(max(y, y_lo), y_hi)):.1f}" for x, y in pts)
            out.append(f'<polyline fill="none" stroke="{COLORS.get(name, "#000")}" stroke-width="1.5" '
                       f'points="{path}"/>')


def write_svg(path, title, runs, bayes):
    """runs: name -> ([(seconds, MiB)], [(seconds, rolling AUC)]); writes the two-panel picture to path."""
    rss = {n: r[0] for n, r in runs.items()}
    auc = {n: r[1] for n, r in runs.items()}
    x_max = max([p[0] for s in list(rss.values()) + list(auc.values()) for p in s] or [1])
    rss_hi = max([p[1] for s in rss.values() for p in s] or [1]) * 1.1
    aucs = [p[1] for s in auc.values() for p in s if p[0] > x_max * 0.05] or [0.5, 1]
    auc_lo, auc_hi = min(aucs) - 0.01, max(max(aucs), bayes if bayes == bayes else 0) + 0.01
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']
    panel(out, TOP + 10, rss, "peak ps RSS (MiB, the larger of the 2 ps, sampled every 0.5 s)", 0, rss_hi, x_max)
    top2 = TOP + 10 + PANEL + GAP
    panel(out, top2, auc, "merged rolling AUC (chief's rolling records, both workers' windows)", auc_lo, auc_hi,
          x_max, bayes if bayes == bayes else None)
    out.append(f'<text x="{(W - RIGHT + LEFT) / 2}" y="{top2 + PANEL + 34}" text-anchor="middle" font-size="12">'
               f'seconds since the cluster started</text>')
    for i, name in enumerate(runs):
        y = TOP + 30 + 18 * i
        out.append(f'<line x1="{W - RIGHT + 10}" x2="{W - RIGHT + 30}" y1="{y}" y2="{y}" '
                   f'stroke="{COLORS.get(name, "#000")}" stroke-width="2"/>'
                   f'<text x="{W - RIGHT + 35}" y="{y + 4}" font-size="12">{escape(name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
