"""The comparison chart: throughput bars, the latency distribution, memory and disk, from compare.json.

    python benchmarks/peers/chart.py benchmarks/peers/compare.json benchmarks/peers/compare.png

``bench_compare.py`` calls ``render`` itself; this entry point redraws from saved results.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

COLORS = {
    "adiskq": "#d1495b",
    "adiskq-py": "#e8919c",
    "sqlite-wal": "#00798c",
    "redis-streams": "#edae49",
    "persist-queue": "#66a182",
    "litequeue": "#8d96a3",
}
THROUGHPUT = [
    ("single", "single\nproducer"),
    ("batch", "batch\nproduce"),
    ("durable32", "32 producers,\nfsync each"),
    ("read", "read back\nin order"),
]


def _short(value: float) -> str:
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if scaled < 10 else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}"


def _bars(axis: Any, peers: list[str], values: list[float | None], unit: str) -> None:
    shown = [(peer, value) for peer, value in zip(peers, values, strict=True) if value is not None]
    if not shown:
        axis.text(0.5, 0.5, "not measured in this run", ha="center", va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        return
    positions = range(len(shown))
    bars = axis.bar(positions, [v for _, v in shown], color=[COLORS.get(p, "#555555") for p, _ in shown])
    for bar, (_, value) in zip(bars, shown, strict=True):
        axis.annotate(
            f"{value:.0f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    axis.set_xticks(list(positions), [p for p, _ in shown], rotation=20, ha="right", fontsize=8)
    axis.set_ylabel(unit)
    axis.margins(y=0.15)
    axis.grid(axis="y", alpha=0.3)


def render(report: dict[str, Any], path: str) -> None:
    summary: dict[str, dict[str, float]] = report["summary"]
    peers = list(summary)
    figure, axes = plt.subplots(2, 2, figsize=(13, 9), gridspec_kw={"height_ratios": [3, 2]})
    (throughput, latency), (memory, disk) = axes

    workloads = [(key, label) for key, label in THROUGHPUT if any(key in summary[p] for p in peers)]
    width = 0.8 / max(1, len(peers))
    for i, peer in enumerate(peers):
        xs = [w + (i - (len(peers) - 1) / 2) * width for w in range(len(workloads))]
        values = [summary[peer].get(key, 0.0) for key, _ in workloads]
        bars = throughput.bar(xs, values, width, label=peer, color=COLORS.get(peer, "#555555"))
        for bar, value in zip(bars, values, strict=True):
            if value:
                throughput.annotate(
                    _short(value),
                    (bar.get_x() + bar.get_width() / 2, value),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
    throughput.set_yscale("log")
    throughput.set_xticks(range(len(workloads)), [label for _, label in workloads], fontsize=9)
    throughput.set_ylabel("messages per second (log scale)")
    throughput.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))
    throughput.yaxis.set_minor_formatter(NullFormatter())
    throughput.set_title("Throughput, 100-byte messages (higher is better)")
    throughput.grid(axis="y", alpha=0.3, which="both")
    throughput.margins(y=0.2)
    figure.legend(
        *throughput.get_legend_handles_labels(), loc="upper center", bbox_to_anchor=(0.5, 0.955), ncols=len(peers)
    )

    samples: dict[str, list[float]] = report.get("latency_samples_us", {})
    for peer in peers:
        values = sorted(samples.get(peer, []))
        if not values:
            continue
        fractions = [100 * (i + 1) / len(values) for i in range(len(values))]
        p50 = summary[peer].get("latency_p50_us", 0.0)
        p99 = summary[peer].get("latency_p99_us", 0.0)
        latency.plot(
            values,
            fractions,
            color=COLORS.get(peer, "#555555"),
            linewidth=2.5 if peer == "adiskq" else 1.5,
            label=f"{peer}: p50 {p50:,.0f} µs, p99 {p99:,.0f} µs",
        )
    if any(samples.get(peer) for peer in peers):
        latency.set_xscale("log")
    latency.set_xlabel("push → consumer in another process, µs (log scale)")
    latency.set_ylabel("% of messages delivered within")
    latency.set_ylim(0, 100)
    latency.axhline(50, color="#999999", linewidth=0.6, linestyle=":")
    latency.axhline(99, color="#999999", linewidth=0.6, linestyle=":")
    latency.set_title("Latency distribution, one message a millisecond (left is better)")
    latency.grid(alpha=0.3, which="both")
    if any(samples.get(peer) for peer in peers):
        latency.legend(fontsize=8, loc="lower right")
    else:
        latency.text(0.5, 0.5, "not measured in this run", ha="center", va="center", transform=latency.transAxes)

    _bars(memory, peers, [summary[p].get("rss_peak_mib") for p in peers], "MiB")
    memory.set_title("Peak memory of the batch run (lower is better;\nRedis includes its server)", fontsize=10)
    _bars(disk, peers, [summary[p].get("disk_bytes_per_message") for p in peers], "bytes")
    disk.set_title("Disk per 100-byte message (lower is better)", fontsize=10)

    meta = report.get("meta", {})
    figure.suptitle(f"adiskq and its peers — {meta.get('mode', '')}, {meta.get('date', '')}", fontsize=13)
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str]) -> int:
    source, target = argv
    with open(source) as file:
        render(json.load(file), target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
