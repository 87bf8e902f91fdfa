#!/usr/bin/python3
"""tpu_plot: PNG plots of tpu-sim's output files (tpusim.plot on the command line).

    tools/tpu_plot.py layers STATS.json -o layers.png        # tpu-sim net --stats
    tools/tpu_plot.py energy STATS.json -o energy.png        # tpu-sim net/topo --stats: energy per layer
    tools/tpu_plot.py timeline T.json -o timeline.png [--max-cycles C]   # --timeline
    tools/tpu_plot.py roofline S1.json [NAME=S2.json] [SWEEP.csv] -o roof.png \\
        (--preset tpuv1 [--array N] | --array N --weight-bytes-per-cycle B --clock-mhz M)
    tools/tpu_plot.py sweep SWEEP.csv -o sweep.png [--x array_n] [--y utilization] [--by workload]

It loads python/tpusim/plot.py by path, so it needs only matplotlib and
pandas (Debian's python3-matplotlib, python3-pandas), not the compiled
module; only `roofline --preset` asks the tpusim module for the preset's
fields (found on PYTHONPATH, or in build/python or build-py/python of this
source tree). docs/python.md, "Plots". Exit status: 0, 2 for a usage error,
3 for an unreadable or malformed input.
"""
import argparse
import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_plot():
    """python/tpusim/plot.py of this source tree, without the tpusim package."""
    path = os.path.join(ROOT, "python", "tpusim", "plot.py")
    spec = importlib.util.spec_from_file_location("tpusim_plot", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def import_tpusim():
    try:
        import tpusim
        return tpusim
    except ImportError:
        pass
    for build in ("build", "build-py"):
        d = os.path.join(ROOT, build, "python")
        if os.path.isdir(os.path.join(d, "tpusim")):
            sys.path.insert(0, d)
            try:
                import tpusim
                return tpusim
            except ImportError:
                sys.path.pop(0)
    return None


def fail(status, msg):
    print(f"tpu_plot: error: {msg}", file=sys.stderr)
    sys.exit(status)


def roofline_config(args):
    cfg = {}
    if args.config:
        with open(args.config) as f:
            cfg.update(json.load(f))
    if args.preset or ("preset" in cfg and not all(
            k in cfg for k in ("array_n", "weight_bytes_per_cycle", "clock_mhz"))):
        tpusim = import_tpusim()
        if tpusim is None:
            fail(2, "--preset needs the tpusim module (PYTHONPATH=BUILD/python); without it give "
                    "--array, --weight-bytes-per-cycle and --clock-mhz")
        preset = args.preset or cfg.pop("preset")
        cfg.pop("preset", None)
        array_n = cfg.pop("array_n", None)
        c = tpusim.Config(preset, **cfg)
        if array_n is not None:
            c = tpusim.Config(preset, array_n=array_n, **cfg)
        cfg = c.to_dict()
    for key, val in (("array_n", args.array), ("weight_bytes_per_cycle", args.weight_bytes_per_cycle),
                     ("clock_mhz", args.clock_mhz)):
        if val is not None:
            cfg[key] = val
    missing = [k for k in ("array_n", "weight_bytes_per_cycle", "clock_mhz") if k not in cfg]
    if missing:
        fail(2, "roofline: give --preset, or --array, --weight-bytes-per-cycle and --clock-mhz "
                f"(missing: {', '.join(missing)})")
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(prog="tpu_plot.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("layers", help="per-layer cycles and utilization of `tpu-sim net --stats`")
    p.add_argument("stats", help="STATS.json of tpu-sim net --stats")
    p.add_argument("--title")
    p = sub.add_parser("energy", help="per-layer energy by unit of `tpu-sim net --stats` (docs/energy.md)")
    p.add_argument("stats", help="STATS.json of tpu-sim net or topo --stats")
    p.add_argument("--title")
    p = sub.add_parser("timeline", help="a picture of a --timeline Chrome trace")
    p.add_argument("trace", help="T.json of tpu-sim run/gemm/net --timeline")
    p.add_argument("--max-cycles", type=int, help="draw cycles up to this one")
    p.add_argument("--min-cycle", type=int, default=0, help="draw from this cycle on")
    p.add_argument("--title")
    p = sub.add_parser("roofline", help="a configuration's roofline with measured runs")
    p.add_argument("points", nargs="+",
                   help="[NAME=]STATS.json (tpu-sim run/gemm/net --stats) or SWEEP.csv")
    p.add_argument("--preset", help="the configuration's preset (needs the tpusim module)")
    p.add_argument("--config", help="a JSON file of configuration fields")
    p.add_argument("--array", type=int, help="N")
    p.add_argument("--weight-bytes-per-cycle", type=int)
    p.add_argument("--clock-mhz", type=float)
    p.add_argument("--ops", choices=["useful", "array"], default="useful",
                   help="count useful MACs (default) or every MAC the array did")
    p.add_argument("--title")
    p = sub.add_parser("sweep", help="utilization against array size, a line per workload")
    p.add_argument("csv", help="SWEEP.csv of tpu-sim sweep --out or tpusim.sweep(out=...)")
    p.add_argument("--x", default="array_n")
    p.add_argument("--y", default="utilization")
    p.add_argument("--by", default="workload", help="a column, or several separated by commas")
    p.add_argument("--title")
    for p in sub.choices.values():
        p.add_argument("-o", "--out", required=True, help="the PNG to write")
    args = ap.parse_args(argv)

    plot = load_plot()
    try:
        if args.cmd == "layers":
            out = plot.layers(args.stats, args.out, title=args.title)
        elif args.cmd == "energy":
            out = plot.energy(args.stats, args.out, title=args.title)
        elif args.cmd == "timeline":
            out = plot.timeline(args.trace, args.out, max_cycles=args.max_cycles,
                                min_cycle=args.min_cycle, title=args.title)
        elif args.cmd == "roofline":
            import pandas as pd

            cfg = roofline_config(args)
            points = []
            for spec in args.points:
                name, sep, path = spec.partition("=")
                if not sep:
                    name, path = None, spec
                if path.endswith(".csv"):
                    points.append(pd.read_csv(path, keep_default_na=False, na_values=[""]))
                else:
                    with open(path) as f:
                        stats = json.load(f)
                    label = name or stats.get("network") or \
                        os.path.splitext(os.path.basename(path))[0]
                    points.append((label, stats))
            out = plot.roofline(points, args.out, cfg, ops=args.ops, title=args.title)
        else:
            by = args.by.split(",") if "," in args.by else args.by
            out = plot.sweep_utilization(args.csv, args.out, x=args.x, y=args.y, by=by,
                                         title=args.title)
    except (OSError, ValueError, KeyError) as e:
        fail(3, str(e))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
