#!/usr/bin/env python3
"""Draw the ratio chart for BENCHMARKS.md from pool-bench's --json output.

Usage: plot.py RESULTS.json OUT.png

One bar per (workload, peer): our pool's median divided by the peer's median, on a log scale.
Left of 1 means we are faster. Our row is `pool` (the intrusive path); fib/qsort compare with
`sequential` as well; idle_cpu compares CPU time burnt while idle.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    src, out = sys.argv[1], sys.argv[2]
    data = json.load(open(src))
    by_workload: dict[str, dict[str, float]] = {}
    for r in data["results"]:
        if r.get("median") is None:
            continue
        by_workload.setdefault(r["workload"], {})[r["pool"]] = r["median"]
    labels, ratios = [], []
    for workload, pools in by_workload.items():
        ours = pools.get("pool")
        if not ours:
            continue
        for peer, median in pools.items():
            if peer.startswith("pool") or not median:
                continue
            labels.append(f"{workload} vs {peer}")
            ratios.append(ours / median)
    if not ratios:
        print("plot.py: no comparable rows", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(labels) + 1.5))
    colors = ["tab:green" if x < 1 else "tab:red" for x in ratios]
    y = range(len(labels))
    ax.barh(list(y), ratios, color=colors)
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.axvline(1 / 3, color="gray", linestyle="--", linewidth=1)
    for i, x in enumerate(ratios):
        ax.text(x, i, f" {x:.2f}", va="center", fontsize=7)
    ax.set_xlabel("our median / peer median (log scale; < 1 = pool faster; dashed: 1/3)")
    ax.set_title(f"pool vs peers, {data.get('threads', '?')} workers, {data.get('date', '')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
