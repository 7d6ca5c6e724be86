"""Draw failure rate by session-length cohort (optionally per tool) to an image, with Wilson intervals.

The image format follows the file's extension (PNG, SVG or PDF). matplotlib is imported only when a plot
is drawn, through its object API and the Agg canvas, so no global backend is switched and
``kindling --help`` never pays for it. The file is written atomically.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kindling.errors import ConfigError
from kindling.fileio import write_atomic
from kindling.mining.stats import COHORTS

DEFAULT_TOP_TOOLS = 15  # as many as `kindling stats` lists by default
# Extension -> matplotlib format. Agg's canvas writes each of these without a GUI backend.
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
# Room above the tallest error bar for its two-line label, as a share of that bar's top.
_LABEL_HEADROOM = 0.22


def plot_format(path: str | Path) -> str:
    """Return the image format for ``path`` from its extension; raise ConfigError for any other."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        known = ", ".join(PLOT_FORMATS)
        raise ConfigError(f"Cannot draw a plot to {str(path)!r}: the file name must end in {known}.")
    return PLOT_FORMATS[suffix]


def _bar(row: Mapping[str, Any]) -> tuple[float, float, float]:
    rate = row.get("failure_rate")
    if rate is None:
        return 0.0, 0.0, 0.0
    return rate, rate - row["ci_low"], row["ci_high"] - rate


def plot_failure_rates(
    stats: Mapping[str, Any], path: str | Path, *, by_tool: bool = False, top: int = DEFAULT_TOP_TOOLS
) -> Path:
    """Draw failure rate by cohort from ``stats`` (``MiningStats.as_dict()``) to ``path``.

    The format follows the extension (.png, .svg or .pdf). With ``by_tool``, the ``top`` most-called
    tools (the rows ``kindling stats --by-tool`` prints) each get a group of one bar per cohort.
    Error bars are the Wilson 95% intervals. Returns the path written. Raises ConfigError for another
    extension or when matplotlib is missing, and StoreError when the file cannot be written.
    """
    image_format = plot_format(path)
    figure = draw_failure_rates(stats, by_tool=by_tool, top=top)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format)
    target = Path(path)
    write_atomic(target, buffer.getvalue())
    return target


def _cohort_label(name: str, low: int, high: int | None, sessions: int, sep: str) -> str:
    span = f"{low}-{high}" if high is not None else f">={low}"
    return f"{name}{sep}({span} msgs, n={sessions})"


def draw_failure_rates(
    stats: Mapping[str, Any], *, by_tool: bool = False, top: int = DEFAULT_TOP_TOOLS
) -> Any:
    """Return a matplotlib ``Figure`` (Agg canvas) of failure rate by cohort; see plot_failure_rates."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("Plotting needs matplotlib: pip install 'kindling-agent[plot]'.") from exc

    cohorts = stats["cohorts"]
    names = [name for name, _low, _high in COHORTS]
    tools = list(stats["tools"])[: max(1, top)] if by_tool else []
    # One group of bars per tool, so as many tools as the table lists stay legible: the figure widens.
    figure = Figure(figsize=(max(9.0, 2.0 + 0.8 * len(tools)), 5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if by_tool:
        positions = list(range(len(tools)))
        width = 0.8 / len(names)
        colors = ["#7fa7d9", "#4a78b5", "#1f4e8c"]
        for index, (name, low, high) in enumerate(COHORTS):
            bars = [_bar(cohorts[name]["tools"].get(tool, {})) for tool in tools]
            axes.bar(
                [p - 0.4 + width * (index + 0.5) for p in positions],
                [b[0] for b in bars],
                width,
                yerr=[[b[1] for b in bars], [b[2] for b in bars]],
                capsize=2,
                color=colors[index % len(colors)],
                label=_cohort_label(name, low, high, cohorts[name]["sessions"], " "),
            )
        if tools:
            axes.set_xticks(positions, tools, rotation=30, ha="right")
            axes.legend(fontsize="small", title="session length")
        else:
            axes.set_xticks([])
            axes.text(0.5, 0.5, "no tool calls", transform=axes.transAxes, ha="center")
        axes.set_title("Tool failure rate per tool and session length (Wilson 95% intervals)")
    else:
        positions = list(range(len(names)))
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
        labels = [_cohort_label(n, lo, hi, cohorts[n]["sessions"], "\n") for n, lo, hi in COHORTS]
        axes.set_xticks(positions, labels)
        axes.set_title("Tool failure rate by session length (Wilson 95% intervals)")
    axes.set_ylabel("failure rate (failed / paired results)")
    tops = [
        row["ci_high"]
        for name in names
        for row in ([cohorts[name]] + [cohorts[name]["tools"].get(tool, {}) for tool in tools])
        if row.get("ci_high") is not None
    ]
    # Labels sit above each error bar; without headroom the tallest one runs into the top axis.
    axes.set_ylim(bottom=0, top=max([*tops, 0.01]) * (1 + _LABEL_HEADROOM))
    axes.yaxis.set_major_formatter(lambda value, _pos: f"{value:.0%}")
    figure.tight_layout()
    return figure
