"""Draw an evaluation's report: each metric's difference warm minus cold with its interval.

One horizontal bar per metric, in points, with its 95% paired bootstrap interval as an error bar and
zero marked: a bar whose interval clears zero on its good side is a real gain. The image format
follows the file's extension (PNG, SVG or PDF); the file is written atomically. matplotlib (the
``plot`` extra) is imported only here, through its object API and the Agg canvas.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kindling.errors import ConfigError
from kindling.fileio import write_atomic

__all__ = ["PLOT_FORMATS", "draw_report", "plot_format", "plot_report"]

PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_COLOURS = {"better": "#2e7d32", "worse": "#c62828", "not distinguishable": "#9e9e9e"}


def plot_format(path: str | Path) -> str:
    """Return the image format for ``path`` from its extension; raise ConfigError for any other."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        known = ", ".join(PLOT_FORMATS)
        raise ConfigError(f"Cannot draw a plot to {str(path)!r}: the file name must end in {known}.")
    return PLOT_FORMATS[suffix]


def draw_report(report: Mapping[str, Any]) -> Any:
    """Return a matplotlib ``Figure`` of the report's metrics (see ``plot_report``).

    Raises ConfigError when matplotlib is missing.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("Plotting needs matplotlib: pip install 'kindling-agent[plot]'.") from exc

    rows = list(report.get("metrics") or [])
    figure = Figure(figsize=(9, 1.2 + 0.55 * max(1, len(rows))), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if not rows:
        axes.text(0.5, 0.5, "nothing scored yet", transform=axes.transAxes, ha="center")
        axes.set_axis_off()
        return figure
    positions = list(range(len(rows)))[::-1]
    differences = [row["difference"] * 100 for row in rows]
    low = [(row["difference"] - row["ci_low"]) * 100 for row in rows]
    high = [(row["ci_high"] - row["difference"]) * 100 for row in rows]
    axes.barh(
        positions,
        differences,
        0.6,
        xerr=[low, high],
        capsize=4,
        color=[_COLOURS.get(row["outcome"], "#9e9e9e") for row in rows],
    )
    labels = [
        f"{row['label']}{'' if row['higher_is_better'] else ' (lower is better)'}\n"
        f"{row['cold']:.0%} -> {row['warm']:.0%}, n={row['cases']}"
        for row in rows
    ]
    axes.set_yticks(positions, labels, fontsize="small")
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xlabel("warm minus cold, in points (95% paired bootstrap interval)")
    endpoint = report.get("endpoint") or {}
    outcome = (report.get("verdict") or {}).get("outcome")
    verdict = f"warm is {outcome}" if outcome in ("better", "worse") else "cold and warm not distinguishable"
    axes.set_title(f"{endpoint.get('model', 'model')}: {verdict}", loc="left")
    figure.tight_layout()
    return figure


def plot_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Draw ``report`` (from ``run_eval``) to ``path`` (.png, .svg or .pdf) and return the path.

    Raises ConfigError for another extension or when matplotlib is missing, StoreError when the
    file cannot be written.
    """
    image_format = plot_format(path)
    figure = draw_report(report)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format)
    target = Path(path)
    write_atomic(target, buffer.getvalue())
    return target
