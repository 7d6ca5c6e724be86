"""Draw failure rate by session-length cohort (optionally per tool) to a PNG, with Wilson intervals.

matplotlib is imported only when a plot is drawn, through its object API and the Agg canvas, so no
global backend is switched and ``kindling --help`` never pays for it. The PNG is written atomically.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kindling.errors import ConfigError
from kindling.fileio import write_atomic
from kindling.mining.stats import COHORTS

DEFAULT_TOP_TOOLS = 8


def _bar(row: Mapping[str, Any]) -> tuple[float, float, float]:
    rate = row.get("failure_rate")
    if rate is None:
        return 0.0, 0.0, 0.0
    return rate, rate - row["ci_low"], row["ci_high"] - rate


def plot_failure_rates(
    stats: Mapping[str, Any], path: str | Path, *, by_tool: bool = False, top: int = DEFAULT_TOP_TOOLS
) -> Path:
    """Draw failure rate by cohort from ``stats`` (``MiningStats.as_dict()``) to the PNG ``path``.

    With ``by_tool`` one bar group per cohort holds the ``top`` most-called tools. Error bars are the
    Wilson 95% intervals. Returns the path written. Raises ConfigError when matplotlib is missing and
    StoreError when the file cannot be written.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("Plotting needs matplotlib: pip install 'kindling[plot]'.") from exc

    cohorts = stats["cohorts"]
    names = [name for name, _low, _high in COHORTS]
    labels = []
    for name, low, high in COHORTS:
        span = f"{low}-{high}" if high is not None else f">={low}"
        labels.append(f"{name}\n({span} msgs, n={cohorts[name]['sessions']})")

    figure = Figure(figsize=(9, 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    positions = list(range(len(names)))
    if by_tool:
        tools = list(stats["tools"])[: max(1, top)]
        width = 0.8 / max(1, len(tools))
        for index, tool in enumerate(tools):
            bars = [_bar(cohorts[name]["tools"].get(tool, {})) for name in names]
            offsets = [p - 0.4 + width * (index + 0.5) for p in positions]
            axes.bar(
                offsets,
                [b[0] for b in bars],
                width,
                yerr=[[b[1] for b in bars], [b[2] for b in bars]],
                capsize=2,
                label=tool,
            )
        if tools:
            axes.legend(fontsize="small", ncols=2)
        else:
            axes.text(0.5, 0.5, "no tool calls", transform=axes.transAxes, ha="center")
        axes.set_title("Tool failure rate by session length (Wilson 95% intervals)")
    else:
        bars = [_bar(cohorts[name]) for name in names]
        axes.bar(
            positions,
            [b[0] for b in bars],
            0.6,
            yerr=[[b[1] for b in bars], [b[2] for b in bars]],
            capsize=6,
            color=["#7fa7d9", "#4a78b5", "#1f4e8c"],
        )
        for x, name in enumerate(names):
            row = cohorts[name]
            if row["failure_rate"] is not None:
                axes.annotate(
                    f"{row['failure_rate']:.1%}\n{row['failures']}/{row['results']}",
                    (x, row["ci_high"]),
                    textcoords="offset points",
                    xytext=(0, 4),
                    ha="center",
                    fontsize="small",
                )
        axes.set_title("Tool failure rate by session length (Wilson 95% intervals)")
    axes.set_xticks(positions, labels)
    axes.set_ylabel("failure rate (failed / paired results)")
    axes.set_ylim(bottom=0)
    axes.yaxis.set_major_formatter(lambda value, _pos: f"{value:.0%}")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    target = Path(path)
    write_atomic(target, buffer.getvalue())
    return target
