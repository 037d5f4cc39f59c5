"""Plot the multi-GPU scaling runs (benchmarks/results/multi_gpu_*.json) into
docs/multi_gpu_scaling.png: speed-up against GPU count, with the ideal line.

    python benchmarks/plot_scaling.py
"""

from __future__ import annotations

import glob
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    runs = sorted(glob.glob(os.path.join(here, "results", "multi_gpu_*.json")))
    if not runs:
        print("no results/multi_gpu_*.json yet: run benchmarks/multi_gpu.py --out ...")
        return 1
    fig, ax = plt.subplots(figsize=(5, 4))
    top = 1
    for path in runs:
        with open(path) as f:
            data = json.load(f)
        gpus = [r["gpus"] for r in data["rows"]]
        speedup = [r["speedup"] for r in data["rows"]]
        top = max(top, *gpus)
        label = (
            f"{data['workload']}, limit {data.get('memory_limit', '?')} "
            f"({data['gpus'][0]}, {data['rows'][0]['seconds']:.1f} s on 1)"
        )
        ax.plot(gpus, speedup, "o-", label=label)
    ax.plot([1, top], [1, top], "k--", lw=1, label="ideal")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up over 1 GPU")
    ax.set_xticks(range(1, top + 1))
    ax.legend(fontsize=7)
    ax.set_title("sliced contraction over several GPUs")
    fig.tight_layout()
    out = os.path.join(here, "..", "docs", "multi_gpu_scaling.png")
    fig.savefig(out, dpi=120)
    print(f"wrote {os.path.normpath(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
