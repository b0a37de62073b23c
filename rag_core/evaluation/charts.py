"""Plotly charts of evaluation results, each drawn against the spec's target, saved as HTML and JSON.

Charts are exported as HTML (plotly.js from its CDN) and as Plotly JSON, which the Analytics page
reads back with `plotly.io.from_json`; no PNG export (kaleido would need a browser download).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

TARGET_HIT = 0.85          # the search spec: over 85% of queries have a relevant result in the top 5
TARGET_LATENCY_MS = 1000   # the search spec: under one second per search


def bars_against_target(df: pd.DataFrame, x: str, y: str, *, color: str | None = None, target: float | None = None,
                        target_label: str = "target", title: str = "", higher_is_better: bool = True,
                        log_y: bool = False, facet_col: str | None = None) -> go.Figure:
    """Grouped bars of `y` per `x` (and `color`, one panel per `facet_col`) with the target drawn as a dashed line."""
    fig = px.bar(df, x=x, y=y, color=color, barmode="group", title=title, log_y=log_y, text_auto=".3~g",
                 facet_col=facet_col)
    if target is not None:
        side = "≥" if higher_is_better else "<"
        fig.add_hline(y=target, line_dash="dash", line_color="firebrick",
                      annotation_text=f"{target_label} {side} {target:g}", annotation_position="top left")
    fig.update_layout(legend_title_text=color or "", margin=dict(t=60, b=40))
    return fig


def line_sweep(df: pd.DataFrame, x: str, ys: Sequence[str], *, title: str = "", marker_x: float | None = None,
               marker_label: str = "default") -> go.Figure:
    """One line per metric over a swept parameter, the default value marked."""
    long = df.melt(id_vars=[x], value_vars=list(ys), var_name="metric", value_name="value")
    fig = px.line(long, x=x, y="value", color="metric", markers=True, title=title)
    if marker_x is not None:
        fig.add_vline(x=marker_x, line_dash="dot", line_color="grey", annotation_text=marker_label)
    return fig


def save_chart(fig: go.Figure, folder: Path, name: str) -> Path:
    """Write `<name>.html` and `<name>.json` under `folder`; returns the HTML path."""
    folder.mkdir(parents=True, exist_ok=True)
    html = folder / f"{name}.html"
    fig.write_html(html, include_plotlyjs="cdn", full_html=True)
    (folder / f"{name}.json").write_text(fig.to_json(), encoding="utf-8")
    return html
