"""Plots of tpu-sim runs: per-layer cycles, rooflines, timelines and sweeps.

Each function draws one figure with matplotlib (the Agg backend: no display
needed), writes it as a PNG and returns its path: a ``str`` whose ``data``
attribute holds the numbers that were drawn (a pandas DataFrame, or for
``timeline`` the list of bars), so a script or a test can check them.

    import tpusim
    r = tpusim.net("programs/nets/digits_cnn/model.json", x, config="tpuv1")
    tpusim.plot.layers(r, "layers.png")

This module needs only matplotlib, NumPy and pandas, not the compiled
extension: it reads statistics (dicts, the JSON files of ``--stats``, sweep
DataFrames or CSVs) and ``--timeline`` traces, so tools/tpu_plot.py loads it
by path for files written by the command-line tools. docs/python.md, "Plots".
"""
import json
import math
import os
import stat
import tempfile

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a display

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, PercentFormatter  # noqa: E402

__all__ = ["layers", "energy", "roofline", "timeline", "sweep_utilization", "timeline_slices",
           "PlotFile"]

_DPI = 110

# The TPUv1 counters, per layer, in stacking order (docs/microarchitecture.md,
# "The TPUv1 counters"): array active + weight stall + weight shift +
# non-matrix = cycles; input data stall and RAW stall are parts of non-matrix.
_LAYER_PARTS = [
    ("active", "array active (rows read)", "#2a9d8f"),
    ("weight_stall", "weight stall", "#e76f51"),
    ("weight_shift", "weight shift", "#f4a261"),
    ("input_data_stall", "non-matrix: input data stall", "#8d99ae"),
    ("raw_stall", "non-matrix: RAW stall", "#bc6c25"),
    ("non_matrix", "non-matrix: the rest", "#d9d9d9"),
]
_LAYER_SPLIT_FIELDS = ["weight_stall_cycles", "weight_shift_cycles", "raw_stall_cycles",
                       "input_data_stall_cycles"]

# Timeline colours: instructions by unit, the controller's stalls by cause.
_UNIT_COLORS = {
    "host_dma": "#4c78a8",
    "weight_dma": "#f58518",
    "systolic_array": "#54a24b",
    "activation_unit": "#b279a2",
    "controller": "#9d9d9d",
}
_STALL_COLORS = {
    "raw_hazard": "#d62728",
    "war_hazard": "#ff9896",
    "waw_hazard": "#8c564b",
    "unit_busy": "#bcbd22",
    "fifo_full": "#17becf",
    "drain": "#7f7f7f",
}
_EXTRA_COLORS = ["#e377c2", "#9467bd", "#2ca02c", "#ff7f0e", "#393b79", "#637939"]


class PlotFile(str):
    """The path of a written PNG; ``data`` holds what was drawn."""

    data = None

    def __new__(cls, path, data=None):
        obj = super().__new__(cls, os.fspath(path))
        obj.data = data
        return obj


# ---------------------------------------------------------------- helpers

def _load_json(src, what):
    """A dict from a dict, a JSON file's path, or an object with ``stats``."""
    if isinstance(src, (str, os.PathLike)):
        try:
            with open(src) as f:
                return json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{what}: {os.fspath(src)} is not valid JSON: {e}") from None
    if hasattr(src, "stats") and not isinstance(src, dict):
        return src.stats
    return src


def _save(fig, path, data):
    """Writes the PNG as the tools write every output: whole or not at all
    (a temporary file renamed over the target), through symlinks (the link's
    final target is replaced), directly into a device or FIFO, with the
    permissions a new file gets (0666 less the umask) or the old file's."""
    target = os.path.realpath(os.fspath(path))
    try:
        if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
            with open(target, "wb") as f:
                fig.savefig(f, dpi=_DPI, format="png", bbox_inches="tight", pad_inches=0.15)
            return PlotFile(os.fspath(path), data)
        folder = os.path.dirname(target)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                fig.savefig(f, dpi=_DPI, format="png", bbox_inches="tight", pad_inches=0.15)
            if os.path.exists(target):
                mode = stat.S_IMODE(os.stat(target).st_mode)
            else:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.chmod(tmp, mode)
            os.replace(tmp, target)  # whole or not at all
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    finally:
        plt.close(fig)
    return PlotFile(os.fspath(path), data)


def _get(d, dotted, default=None):
    """d["a"]["b"] or d["a.b"] (a sweep's flattened column) for "a.b"."""
    if d is None:
        return default
    if dotted in d:
        v = d[dotted]
    else:
        v = d
        for part in dotted.split("."):
            if isinstance(v, dict) and part in v:
                v = v[part]
            else:
                return default
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return default
    return v


def _cfg_fields(cfg):
    """array_n, weight_bytes_per_cycle, clock_mhz of a Config, dict or preset name."""
    if cfg is None:
        raise ValueError("roofline: cfg is required (a tpusim.Config, a preset name or a dict "
                         "with array_n, weight_bytes_per_cycle and clock_mhz)")
    if isinstance(cfg, str):  # a preset: needs the extension
        try:
            from ._tpusim import Config
        except ImportError:
            try:
                from tpusim import Config
            except ImportError:
                raise ValueError(f"roofline: the preset '{cfg}' needs the tpusim extension; "
                                 "pass a dict with array_n, weight_bytes_per_cycle and "
                                 "clock_mhz instead") from None
        cfg = Config(cfg)
    if hasattr(cfg, "to_dict"):
        cfg = cfg.to_dict()
    need = ["array_n", "weight_bytes_per_cycle", "clock_mhz"]
    missing = [k for k in need if k not in cfg]
    if missing:
        raise ValueError(f"roofline: cfg lacks {', '.join(missing)}")
    return {k: cfg[k] for k in need}


def _si(x, unit):
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


# ---------------------------------------------------------------- layers

def _layer_list(stats):
    if isinstance(stats, list):
        return stats, {}
    s = _load_json(stats, "layers")
    if not isinstance(s, dict) or not isinstance(s.get("layers"), list):
        raise ValueError("layers: expected a network run's statistics (tpusim.net(...).stats or "
                         "`tpu-sim net --stats` JSON) with a 'layers' list")
    return s["layers"], s


def _layer_frame(layer_list):
    import pandas as pd

    names = [str(lay.get("name", i)) for i, lay in enumerate(layer_list)]
    programs = {lay.get("program", 0) for lay in layer_list}
    if len(programs) > 1 or len(set(names)) < len(names):
        names = [f"{n} (p{lay.get('program', 0)})" for n, lay in zip(names, layer_list)]
    split = all(all(f in lay for f in _LAYER_SPLIT_FIELDS) for lay in layer_list)
    rows = []
    for name, lay in zip(names, layer_list):
        cycles = int(lay.get("cycles", 0))
        row = {"layer": name, "type": lay.get("type", ""), "cycles": cycles,
               "utilization": float(lay.get("utilization", 0.0)),
               "active": int(lay.get("mmc_rows", 0))}
        if split:
            row["weight_stall"] = int(lay["weight_stall_cycles"])
            row["weight_shift"] = int(lay["weight_shift_cycles"])
            row["input_data_stall"] = int(lay["input_data_stall_cycles"])
            row["raw_stall"] = int(lay["raw_stall_cycles"])
            rest = cycles - row["active"] - row["weight_stall"] - row["weight_shift"]
            row["non_matrix"] = max(rest - row["input_data_stall"] - row["raw_stall"], 0)
        else:
            row["non_matrix"] = max(cycles - row["active"], 0)
        rows.append(row)
    return pd.DataFrame(rows), split


def layers(stats, path, *, title=None):
    """Per-layer cycles and utilization of a network run.

    stats: a NetResult (``tpusim.net(...)``), its ``stats`` dict, the path of
    a ``tpu-sim net --stats`` JSON file, or the list of layer dicts. Top:
    each layer's cycles as a stacked bar, split by the TPUv1 counters (array
    active = the rows the layer's MMCs read, weight stall, weight shift,
    input data stall, RAW stall and the rest of non-matrix); statistics
    without the per-layer stall fields give array active and the rest, and
    the legend says so. Bottom: each layer's utilization (its MACs over
    cycles x N x N). ``data``: a DataFrame of the bars.
    """
    layer_list, s = _layer_list(stats)
    if not layer_list:
        raise ValueError("layers: the statistics have no layers")
    df, split = _layer_frame(layer_list)
    fig, (ax, au) = plt.subplots(2, 1, figsize=(max(6.5, 0.75 * len(df) + 3), 6.2), sharex=True,
                                 gridspec_kw={"height_ratios": [2.3, 1]}, dpi=_DPI)
    x = range(len(df))
    bottom = [0] * len(df)
    handles = []
    for key, label, color in _LAYER_PARTS:
        if key not in df:
            continue
        if key == "non_matrix" and not split:
            label = "rest (no stall split in these statistics)"
        vals = df[key].tolist()
        ax.bar(x, vals, bottom=bottom, color=color, width=0.7, edgecolor="white", linewidth=0.5)
        handles.append(Patch(facecolor=color, label=label))
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, c in enumerate(df["cycles"]):
        ax.annotate(f"{c:,}", (i, c), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_ylabel("cycles")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.margins(y=0.12)
    ax.legend(handles=handles[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="cycles, by the TPUv1 counters" if split else "cycles (no stall split)",
              title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    total = s.get("total", {}) if isinstance(s, dict) else {}
    name = s.get("network", "network") if isinstance(s, dict) else "network"
    if title is None:
        title = f"{name}: cycles per layer"
        extra = []
        if "array_n" in s:
            extra.append(f"N={s['array_n']}")
        if "batch" in s:
            extra.append(f"batch {s['batch']}")
        if "cycles" in total:
            extra.append(f"{total['cycles']:,} cycles in all")
        if "clock_mhz" in total:
            extra.append(f"{total['clock_mhz']} MHz")
        if extra:
            title += " (" + ", ".join(extra) + ")"
    ax.set_title(title, fontsize=11)

    au.bar(x, df["utilization"], color="#264653", width=0.7)
    for i, u in enumerate(df["utilization"]):
        au.annotate(f"{100 * u:.1f}%", (i, u), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    au.set_ylabel("utilization\n(MACs / cycles·N²)")
    au.yaxis.set_major_formatter(PercentFormatter(1.0))
    au.set_ylim(0, max(0.05, df["utilization"].max() * 1.3))
    au.grid(axis="y", alpha=0.3)
    au.set_xticks(list(x))
    au.set_xticklabels([f"{n}\n{t}" if t else n for n, t in zip(df["layer"], df["type"])],
                       fontsize=8, rotation=30 if len(df) > 8 else 0,
                       ha="right" if len(df) > 8 else "center")
    au.set_xlabel("layer")
    fig.tight_layout()
    return _save(fig, path, df)


def energy(stats, path, *, title=None):
    """Per-layer energy of a network run, a stacked bar per layer by unit.

    stats: as for ``layers`` (a NetResult, its ``stats``, a ``tpu-sim net
    --stats`` or ``topo --stats`` JSON path, or the list of layer dicts). Each
    layer's energy in µJ split by the energy model's units (docs/energy.md),
    labelled with its total and average power. ``data``: a DataFrame of the
    bars (µJ per unit, total_uj, avg_power_w).
    """
    import importlib.util

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_energy.py")
    spec = importlib.util.spec_from_file_location("tpusim_plot_energy", here)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import types
    helpers = types.SimpleNamespace(plt=plt, Patch=Patch, _DPI=_DPI, _layer_list=_layer_list,
                                    _layer_frame=_layer_frame, _save=_save)
    return mod.draw(helpers, stats, path, title)


# ---------------------------------------------------------------- roofline

def _point_from_stats(label, s, cfg, ops):
    """One measured point from a stats dict or a sweep row (a dict)."""
    n = int(_get(s, "array_n", cfg["array_n"]))
    clock = float(_get(s, "clock_mhz", _get(s, "total.clock_mhz", cfg["clock_mhz"])))
    bw = float(_get(s, "weight_bytes_per_cycle", cfg["weight_bytes_per_cycle"]))
    tot = s.get("total", s) if isinstance(s.get("total"), dict) else s
    cycles = _get(tot, "cycles")
    if ops == "useful":
        macs = _get(tot, "useful_macs", _get(tot, "tpuv1.useful_macs", _get(tot, "macs")))
    else:
        macs = _get(tot, "macs")
    wbytes = _get(s, "weight_bytes", _get(tot, "weight_bytes"))
    if wbytes is None and isinstance(s.get("layers"), list):
        wbytes = sum(int(lay.get("weight_bytes", 0)) for lay in s["layers"])
    if wbytes is None:
        tiles = _get(s, "units.weight_dma.instructions")
        if tiles is None and isinstance(s.get("programs"), list):
            t = [_get(p, "units.weight_dma.instructions") for p in s["programs"]]
            tiles = sum(t) if all(v is not None for v in t) else None
        if tiles is not None:
            wbytes = float(tiles) * n * n
    if cycles is None or macs is None:
        return None, f"{label}: no cycles or MACs"
    if not wbytes:
        return None, f"{label}: no weight traffic in its statistics"
    seconds = float(cycles) / (clock * 1e6)
    return {"label": label, "array_n": n, "weight_bytes_per_cycle": bw, "clock_mhz": clock,
            "macs": float(macs), "weight_bytes": float(wbytes), "cycles": int(cycles),
            "intensity": float(macs) / float(wbytes),
            "ops_per_s": 2.0 * float(macs) / seconds}, None


def _roofline_points(points, cfg, ops):
    import pandas as pd

    out, skipped = [], []

    def add(label, s, series=None):
        p, why = _point_from_stats(label, s, cfg, ops)
        if p is None:
            skipped.append(why)
        else:
            p["series"] = series or label
            out.append(p)

    def walk(item, label=None):
        if isinstance(item, pd.DataFrame):
            for i, row in item.iterrows():
                r = {k: v for k, v in row.items()}
                if r.get("status", "ok") != "ok":
                    skipped.append(f"{r.get('workload', i)}: run failed")
                    continue
                series = str(r.get("label", r.get("workload", f"run {i}")))
                name = series
                if "array_n" in item.columns and item["array_n"].nunique() > 1:
                    name += f" N={int(r['array_n'])}"
                add(name, r, series)
        elif isinstance(item, dict) and not any(k in item for k in ("cycles", "total", "layers")):
            for k, v in item.items():  # {label: stats}
                walk(v, str(k))
        elif isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
            walk(item[1], item[0])
        elif isinstance(item, (list, tuple)):
            for j, v in enumerate(item):
                walk(v, None)
        else:
            s = _load_json(item, "roofline")
            if label is None:
                label = str(s.get("network") or s.get("label") or f"run {len(out) + len(skipped)}")
            add(label, s)

    walk(points)
    return pd.DataFrame(out), skipped


def _place_labels(fig, ax, labels, fontsize=7.5):
    """Labels beside points, moved down where they would overlap (a greedy
    placement in pixels), with a thin line back to a moved one's point."""
    fig.canvas.draw()
    char_w, line_h = fontsize * 0.62 * _DPI / 72, fontsize * 1.35 * _DPI / 72
    placed = []
    to_px = ax.transData.transform
    for x, y, text in sorted(labels, key=lambda t: -t[1]):
        px, py = to_px((x, y))
        w = len(text) * char_w
        # Downwards only, so the labels keep the points' order and their
        # lines do not cross.
        for k in range(0, -40, -1):
            bx, by = px + (5 if k == 0 else 44), py + 2 + k * line_h
            if all(bx + w < qx or qx + qw < bx or by + line_h < qy or qy + line_h < by
                   for qx, qy, qw in placed):
                break
        placed.append((bx, by, w))
        ax.annotate(text, (x, y), xytext=(bx - px, by - py), textcoords="offset pixels",
                    fontsize=fontsize, va="bottom",
                    arrowprops=None if k == 0 else {"arrowstyle": "-", "lw": 0.6,
                                                    "color": "#555555", "shrinkA": 1,
                                                    "shrinkB": 4})


def roofline(points, path, cfg, *, ops="useful", title=None):
    """The roofline of a configuration with measured points.

    cfg: a tpusim.Config, a preset name or a dict with ``array_n``,
    ``weight_bytes_per_cycle`` and ``clock_mhz``. The roof: peak N*N MACs per
    cycle x 2 ops x clock, and the weight-memory slope (weight_bytes_per_cycle
    x clock bytes/s x 2 ops per MAC); x is the operational intensity, MACs
    per weight byte read by the weight DMA, log-log as in the TPUv1 paper.

    points: a sweep DataFrame (rows with status ok; each row's own array_n,
    weight_bytes_per_cycle and clock_mhz columns override cfg's, and every
    distinct configuration gets its own roof in the colour of its points),
    results or stats dicts (GemmResult, NetResult, RunResult, ``--stats``
    JSON paths), ``{label: stats}``, ``(label, stats)`` pairs, or a list of
    any of these. Weight bytes come from ``weight_bytes``, the layers'
    ``weight_bytes`` (networks) or RW count x N*N; a point without them
    (e.g. a network's sweep row) is left out, and the figure notes it.
    ops: "useful" (default; useful MACs, the padding's products not counted)
    or "array" (every MAC the array did). ``data``: a DataFrame of the points.
    """
    import pandas as pd

    if ops not in ("useful", "array"):
        raise ValueError("roofline: ops must be 'useful' or 'array'")
    base = _cfg_fields(cfg)
    df, skipped = _roofline_points(points, base, ops)
    fig, ax = plt.subplots(figsize=(8.2, 5.6), dpi=_DPI)
    # The configuration's roof, and one for every other configuration of the points.
    groups = {(int(base["array_n"]), float(base["weight_bytes_per_cycle"]),
               float(base["clock_mhz"]))}
    if not df.empty:
        groups |= {(int(r.array_n), float(r.weight_bytes_per_cycle), float(r.clock_mhz))
                   for r in df.itertuples()}
    groups = sorted(groups)
    xmin, xmax = 0.5, 1e4
    if not df.empty:
        xmin = min(xmin, df["intensity"].min() / 2)
        xmax = max(xmax, df["intensity"].max() * 4)
    xs = [xmin * (xmax / xmin) ** (i / 200) for i in range(201)]
    cmap = plt.get_cmap("viridis" if len(groups) > 3 else "tab10")
    colors = {}
    for gi, (n, bw, clk) in enumerate(groups):
        color = cmap(gi / max(len(groups) - 1, 1) * 0.9) if len(groups) > 3 else cmap(gi)
        colors[(n, bw, clk)] = color
        peak = n * n * 2.0 * clk * 1e6
        slope = bw * clk * 1e6 * 2.0
        ridge = peak / slope
        ax.plot(xs, [min(peak, slope * x) for x in xs], color=color, lw=2,
                label=f"roof N={n}: peak {_si(peak, 'ops/s')}, "
                      f"{_si(bw * clk * 1e6, 'B/s')} weights, ridge {ridge:.0f} MACs/B")
        ax.axvline(ridge, color=color, lw=0.6, ls=":")
    if not df.empty:
        # A marker per workload (its legend on the left), the colour of its
        # configuration's roof; each point labelled: by its N where the
        # workload has points at several N, else by its name.
        series = list(dict.fromkeys(df["series"]))
        markers = dict(zip(series, "osD^vP*Xph<>" * 4))
        several = {k for k in series if df[df.series == k]["array_n"].nunique() > 1}
        labels = []
        for r in df.itertuples():
            color = colors[(int(r.array_n), float(r.weight_bytes_per_cycle), float(r.clock_mhz))]
            ax.scatter(r.intensity, r.ops_per_s, s=42, color=color, marker=markers[r.series],
                       edgecolor="black", linewidth=0.6, zorder=3)
            labels.append((r.intensity, r.ops_per_s,
                           f"N={r.array_n}" if r.series in several else r.label))
        if len(series) > 1 or several:
            from matplotlib.lines import Line2D
            leg = ax.legend(handles=[Line2D([], [], ls="none", marker=markers[k], color="#bbbbbb",
                                            markeredgecolor="black", label=k) for k in series],
                            fontsize=7.5, loc="upper left", title="measured", title_fontsize=7.5)
            ax.add_artist(leg)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    if not df.empty:
        _place_labels(fig, ax, labels)
    ax.set_xlabel("operational intensity (MACs per weight byte)")
    ax.set_ylabel(("useful " if ops == "useful" else "") + "ops/s (2 ops per MAC)")
    if title is None:
        title = "Roofline: " + ", ".join(f"N={n}" for n, _, _ in groups) + \
                f" at {groups[0][2]:g} MHz"
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    ax.legend(fontsize=7.5, loc="lower right")
    if skipped:
        note = "not drawn: " + "; ".join(skipped[:4]) + (" ..." if len(skipped) > 4 else "")
        fig.text(0.01, 0.01, note, fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.03 if skipped else 0, 1, 1))
    out = df.copy() if not df.empty else pd.DataFrame(columns=["label", "intensity", "ops_per_s"])
    out.attrs["skipped"] = skipped
    return _save(fig, path, out)


# ---------------------------------------------------------------- timeline

def timeline_slices(trace):
    """The bars of a ``--timeline`` Chrome trace (a dict or a JSON file path).

    A list of dicts, one per complete ("X") event, in the trace's order:
    process, track (its thread name), name, kind ("instruction", "issue",
    "stall" or "wait": an MMC.S waiting in the matrix unit for its weights),
    cause (for a stall), start (cycle) and cycles, converted from
    ts and dur (microseconds) with ``otherData.clock_mhz``; and the counters
    as ``(process, name, cycle, value)`` tuples in a second list. Raises
    ValueError on anything that is not such a trace.
    """
    t = _load_json(trace, "timeline")
    if not isinstance(t, dict) or not isinstance(t.get("traceEvents"), list):
        raise ValueError("timeline: not a Chrome trace: expected a JSON object with a "
                         "'traceEvents' list (tpu-sim run/gemm/net --timeline T.json)")
    clock = _get(t, "otherData.clock_mhz")
    if not isinstance(clock, (int, float)) or clock <= 0:
        raise ValueError("timeline: the trace has no otherData.clock_mhz, so its times cannot "
                         "be turned back into cycles (was it written by tpu-sim --timeline?)")
    procs, threads = {}, {}
    for e in t["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "M":
            if e.get("name") == "process_name":
                procs[e.get("pid")] = _get(e, "args.name", str(e.get("pid")))
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = _get(e, "args.name", str(e.get("tid")))
    bars, counters = [], []
    for i, e in enumerate(t["traceEvents"]):
        if not isinstance(e, dict):
            raise ValueError(f"timeline: traceEvents[{i}] is not an object")
        ph = e.get("ph")
        if ph == "X":
            ts, dur = e.get("ts"), e.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or dur < 0:
                raise ValueError(f"timeline: traceEvents[{i}] ('{e.get('name')}') is a complete "
                                 "slice without a numeric ts and dur >= 0")
            name = str(e.get("name", ""))
            track = threads.get((e.get("pid"), e.get("tid")), f"tid {e.get('tid')}")
            if name.startswith("stall: "):
                kind, cause = "stall", name[len("stall: "):]
            elif name.startswith("issue "):
                kind, cause = "issue", None
            elif name.startswith("wait for weights: "):
                kind, cause = "wait", None
            else:
                kind, cause = "instruction", None
            bars.append({"process": procs.get(e.get("pid"), str(e.get("pid"))), "pid": e.get("pid"),
                         "tid": e.get("tid"), "track": track, "name": name, "kind": kind,
                         "cause": cause, "start": int(round(ts * clock)),
                         "cycles": int(round(dur * clock)), "args": e.get("args", {})})
        elif ph == "C":
            ts = e.get("ts")
            if not isinstance(ts, (int, float)):
                raise ValueError(f"timeline: traceEvents[{i}] (counter '{e.get('name')}') has no "
                                 "numeric ts")
            for k, v in (e.get("args") or {}).items():
                counters.append((procs.get(e.get("pid"), str(e.get("pid"))),
                                 f"{e.get('name')} ({k})" if len(e.get("args")) > 1 else
                                 str(e.get("name")), int(round(ts * clock)), v))
    return bars, counters


def _unit_of(track):
    return track.split(" #")[0]


def timeline(trace, path, max_cycles=None, *, min_cycle=0, title=None):
    """A picture of a run's ``--timeline`` trace.

    trace: the path of a ``tpu-sim run/gemm/net --timeline`` JSON file or
    the loaded dict. One row per track (controller, host_dma, weight_dma,
    systolic_array, activation_unit, and the extra tracks "#2"... of
    overlapping instructions; prefixed by the program for a network's
    several programs) that has a slice in the drawn cycles, a bar per slice
    from its start cycle over its cycles: instructions coloured by unit (and
    named where the name fits), the controller's one-cycle issues in black
    and its stall runs coloured by cause. Below, one panel per counter (the
    array's rows in flight, weight FIFO occupancy, weight tiles requested) as steps. x: cycles
    ``min_cycle`` .. ``max_cycles`` (default: the whole run). ``data``: the
    drawn bars, as timeline_slices gives them.
    """
    bars, counters = timeline_slices(trace)
    t = _load_json(trace, "timeline")
    clock = _get(t, "otherData.clock_mhz")
    array_n = _get(t, "otherData.array_n")
    if not bars:
        raise ValueError("timeline: the trace has no slices")
    end = max(b["start"] + b["cycles"] for b in bars)
    hi = end if max_cycles is None else min(end, int(max_cycles))
    lo = int(min_cycle)
    if hi <= lo:
        raise ValueError(f"timeline: nothing to draw between cycles {lo} and {hi}")
    drawn = [b for b in bars if b["start"] < hi and b["start"] + b["cycles"] > lo]
    if not drawn:
        raise ValueError(f"timeline: no slice between cycles {lo} and {hi}")
    multi = len({b["pid"] for b in bars}) > 1

    def num(v):
        return v if isinstance(v, (int, float)) else 0

    # Rows: the tracks with a drawn slice, by process, then track id (the
    # controller first, as the trace sorts them).
    order = sorted({(b["pid"], b["tid"]) for b in drawn}, key=lambda k: (num(k[0]), num(k[1])))
    names = {(b["pid"], b["tid"]): (f"{b['process']}: {b['track']}" if multi else b["track"])
             for b in bars}
    row = {k: i for i, k in enumerate(order)}
    # Counters: one panel per name, a line per process.
    series = {}
    for proc, name, cyc, val in counters:
        series.setdefault(name, {}).setdefault(proc, []).append((cyc, val))
    n_panels = len(series)
    top_h = max(0.34 * len(order), 1.4)
    fig = plt.figure(figsize=(11, 1.2 + top_h + 1.0 * n_panels), dpi=_DPI)
    gs = fig.add_gridspec(1 + n_panels, 1, height_ratios=[top_h] + [0.85] * n_panels,
                          hspace=0.12)
    ax = fig.add_subplot(gs[0])
    fig.subplots_adjust(left=0.14, right=0.80)
    axes_px = ax.get_position().width * fig.get_figwidth() * _DPI
    span = hi - lo
    extra = {}
    for b in drawn:
        y = row[(b["pid"], b["tid"])]
        w = max(b["cycles"], span / 2000)  # a one-cycle slice stays visible
        if b["kind"] == "stall":
            color = _STALL_COLORS.get(b["cause"])
            if color is None:
                color = extra.setdefault(b["cause"], _EXTRA_COLORS[len(extra) % len(_EXTRA_COLORS)])
            ax.broken_barh([(b["start"], w)], (y - 0.32, 0.64), facecolor=color,
                           edgecolor="none")
        elif b["kind"] == "issue":
            ax.broken_barh([(b["start"], w)], (y - 0.42, 0.84), facecolor="#222222",
                           edgecolor="none")
        elif b["kind"] == "wait":
            ax.broken_barh([(b["start"], w)], (y - 0.36, 0.72), facecolor="none",
                           edgecolor=_UNIT_COLORS.get(_unit_of(b["track"]), "#7f7f7f"),
                           hatch="////", linewidth=0.4)
        else:
            color = _UNIT_COLORS.get(_unit_of(b["track"]), "#7f7f7f")
            wide = b["cycles"] / span * axes_px > 4  # a white edge would hide a thin bar
            ax.broken_barh([(b["start"], w)], (y - 0.36, 0.72), facecolor=color,
                           edgecolor="white" if wide else "none", linewidth=0.4)
            x0, x1 = max(b["start"], lo), min(b["start"] + b["cycles"], hi)
            # The instruction's text, where it fits inside its bar.
            if len(b["name"]) * 5.8 < (x1 - x0) / span * axes_px:
                ax.text((x0 + x1) / 2, y, b["name"], ha="center", va="center", fontsize=6.5,
                        color="white", clip_on=True)
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([names[k] for k in order], fontsize=8)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    ax.grid(axis="x", alpha=0.3)
    units = {_unit_of(b["track"]) for b in drawn if b["kind"] == "instruction"}
    handles = [Patch(facecolor=c, label=u) for u, c in _UNIT_COLORS.items() if u in units]
    handles += [Patch(facecolor=_UNIT_COLORS.get(u, "#7f7f7f"), label=u)
                for u in sorted(units - set(_UNIT_COLORS))]
    if any(b["kind"] == "issue" for b in drawn):
        handles.append(Patch(facecolor="#222222", label="issue (1 cycle)"))
    if any(b["kind"] == "wait" for b in drawn):
        handles.append(Patch(facecolor="none", edgecolor=_UNIT_COLORS["systolic_array"], hatch="////",
                             label="MMC.S waits for weights"))
    causes = {b["cause"] for b in drawn if b["kind"] == "stall"}
    handles += [Patch(facecolor=c, label=f"stall: {k}") for k, c in _STALL_COLORS.items()
                if k in causes]
    handles += [Patch(facecolor=c, label=f"stall: {k}") for k, c in extra.items()]
    ax.legend(handles=handles, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              title="instructions by unit,\ncontroller stalls by cause", title_fontsize=7.5)
    if title is None:
        title = "Timeline"
        if array_n:
            title += f" (N={array_n}" + (f", {clock:g} MHz)" if clock else ")")
        title += f": cycles {lo:,} to {hi:,}" + (f" of {end:,}" if hi < end or lo > 0 else "")
    ax.set_title(title, fontsize=11)
    last = ax
    cmap = plt.get_cmap("tab10")
    procs = list(dict.fromkeys(b["process"] for b in bars))
    for i, (name, by_proc) in enumerate(series.items()):
        ac = fig.add_subplot(gs[1 + i], sharex=ax)
        for proc, pts in by_proc.items():
            pts.sort()
            xs = [p[0] for p in pts] + [end]
            ys = [p[1] for p in pts] + [pts[-1][1]]
            # One colour per counter, or per program when there are several.
            k = procs.index(proc) if multi and proc in procs else i
            ac.step(xs, ys, where="post", lw=1.2, color=cmap(k % 10),
                    label=proc if multi else None)
        ac.set_ylabel(name.replace(" in flight", "\nin flight").replace(" requested",
                                                                        "\nrequested"),
                      fontsize=8)
        ac.grid(alpha=0.3)
        ac.tick_params(labelsize=8)
        ac.set_ylim(bottom=0)
        if multi:
            ac.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
        plt.setp(last.get_xticklabels(), visible=False)
        last = ac
    last.set_xlabel("cycle")
    last.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    return _save(fig, path, drawn)


# ---------------------------------------------------------------- sweeps

def sweep_utilization(df, path, x="array_n", y="utilization", by="workload", *, title=None):
    """A sweep's ``y`` against ``x`` (log2 axis), one line per ``by``.

    df: a tpusim.sweep DataFrame or the path of its CSV (``tpu-sim sweep
    --out``). Rows whose status is not ok are left out (and listed in the
    legend as failed). ``by`` may be a column or a list of columns. There
    must be one row per (by, x): select one configuration of any other grid
    field first. ``data``: the pivoted table that was drawn.
    """
    import pandas as pd

    if isinstance(df, (str, os.PathLike)):
        df = pd.read_csv(df, keep_default_na=False, na_values=[""])
    by_cols = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [x, y] + by_cols if c not in df.columns]
    if missing:
        raise ValueError(f"sweep_utilization: the table has no column {', '.join(missing)}")
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    failed = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    key = ok[by_cols].astype(str).agg(" ".join, axis=1) if len(ok) else pd.Series(dtype=str)
    ok = ok.assign(_line=key)
    dup = ok.duplicated(["_line", x])
    if dup.any():
        raise ValueError(f"sweep_utilization: several rows per ({', '.join(by_cols)}, {x}); "
                         "select one configuration of the other grid fields first, or pass "
                         "them in `by`")
    table = ok.pivot(index=x, columns="_line", values=y).sort_index()
    table.columns.name = " ".join(by_cols)
    fig, ax = plt.subplots(figsize=(7.6, 4.8), dpi=_DPI)
    markers = "osD^vP*X"
    for i, col in enumerate(table.columns):
        s = table[col].dropna()
        ax.plot(s.index, s.values, marker=markers[i % len(markers)], lw=1.8, label=col)
    if len(failed):
        fk = failed[by_cols].astype(str).agg(" ".join, axis=1)
        for (name, xv) in sorted(zip(fk, failed[x])):
            ax.plot([], [], ls="none", marker="x", color="black",
                    label=f"{name} at {x}={xv}: failed")
    ax.set_xscale("log", base=2)
    xs = sorted(set(df[x].dropna().tolist()))
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{v:g}" for v in xs])
    ax.minorticks_off()
    ax.set_xlabel({"array_n": "array size N (N x N MACs)"}.get(x, x))
    if y == "utilization":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel("utilization (MACs / cycles·N²)")
        ax.set_ylim(0, min(1.05, max(0.1, (table.max().max() if table.size else 0) * 1.15)))
    else:
        ax.set_ylabel(y)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=" ".join(by_cols), title_fontsize=8)
    if title is None:
        title = f"{'Utilization' if y == 'utilization' else y} against " \
                f"{'array size' if x == 'array_n' else x}"
        same = [f"{df[c].iloc[0]}{u}" for c, u in (("preset", ""), ("clock_mhz", " MHz"))
                if c in df.columns and c != x and df[c].nunique() == 1]
        if same:
            title += f" ({', '.join(same)})"
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, path, table)
