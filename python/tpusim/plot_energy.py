"""The energy breakdown per layer (tpusim.plot.energy; docs/energy.md).

Kept apart from plot.py, which loads it by path (so that both the package and
tools/tpu_plot.py, which loads plot.py without the package, find it) and
passes in the helpers it shares (pyplot, _layer_list, _layer_frame, _save).
"""

# The energy model's units (src/model/energy.h, kEnergyUnitNames) in stacking
# order, with the legend's words and colours.
UNITS = [
    ("matrix_unit", "matrix unit (MACs)", "#2a9d8f"),
    ("unified_buffer", "unified buffer", "#264653"),
    ("accumulators", "accumulators", "#e9c46a"),
    ("weight_fifo", "weight FIFO", "#f4a261"),
    ("activation_unit", "activation unit", "#b279a2"),
    ("weight_memory", "weight memory (DDR3)", "#e76f51"),
    ("host_interface", "host interface (PCIe)", "#4c78a8"),
    ("controller", "controller (instructions)", "#9d9d9d"),
    ("fixed", "fixed static (interfaces, clock)", "#d9d9d9"),
]


def draw(plot, stats, path, title=None):
    """plot.energy's body; `plot` holds plot.py's helpers."""
    import pandas as pd

    plt = plot.plt
    layer_list, s = plot._layer_list(stats)
    if not layer_list:
        raise ValueError("energy: the statistics have no layers")
    if not all(isinstance(lay.get("energy_by_unit_j"), dict) for lay in layer_list):
        raise ValueError("energy: the layers have no 'energy_by_unit_j' (statistics of a tpu-sim "
                         "without the energy model?)")
    names = list(plot._layer_frame(layer_list)[0]["layer"])
    rows = []
    for name, lay in zip(names, layer_list):
        row = {"layer": name, "type": lay.get("type", "")}
        for unit, _, _ in UNITS:
            row[unit] = 1e6 * float(lay["energy_by_unit_j"].get(unit, 0.0))  # uJ
        row["total_uj"] = 1e6 * float(lay.get("energy_j", 0.0))
        row["avg_power_w"] = float(lay.get("avg_power_w", 0.0))
        rows.append(row)
    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.75 * len(df) + 3), 4.8), dpi=plot._DPI)
    x = range(len(df))
    bottom = [0.0] * len(df)
    handles = []
    for unit, label, color in UNITS:
        vals = df[unit].tolist()
        ax.bar(x, vals, bottom=bottom, color=color, width=0.7, edgecolor="white", linewidth=0.5)
        handles.append(plot.Patch(facecolor=color, label=label))
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, (e, p) in enumerate(zip(df["total_uj"], df["avg_power_w"])):
        ax.annotate(f"{e:.3g} µJ\n{p:.3g} W", (i, bottom[i]), ha="center", va="bottom", fontsize=7,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_ylabel("energy (µJ)")
    ax.margins(y=0.15)
    ax.legend(handles=handles[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              title="energy by unit (dynamic + static)", title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{n}\n{t}" if t else n for n, t in zip(df["layer"], df["type"])],
                       fontsize=8, rotation=30 if len(df) > 8 else 0,
                       ha="right" if len(df) > 8 else "center")
    if title is None:
        name = s.get("network", "network") if isinstance(s, dict) else "network"
        title = f"{name}: energy per layer"
        energy = (s.get("total", {}) or {}).get("energy", {}) if isinstance(s, dict) else {}
        if "total_j" in energy:
            title += f" ({1e3 * energy['total_j']:.4g} mJ, {energy.get('avg_power_w', 0):.3g} W average)"
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return plot._save(fig, path, df)
