"""docs/models.md from the model zoo's results (bench/model_zoo.py): the intro, the table of
measurements, what a correlation means for a random-weight network, notes per model where
something is off, and how to regenerate. Every figure comes from the results; nothing is typed in,
except the sections of bench/zoo_handwritten.md (transformer layers: measured by
their own tests), copied in as they are, so that regenerating the page keeps them.
"""

from pathlib import Path

HANDWRITTEN = Path(__file__).resolve().parent / "zoo_handwritten.md"  # docs/models.md's hand-written sections
MIN_CORRELATION = 0.95  # issue 28's bar for tpu-sim's int8 output against PyTorch's float output
DIAGNOSTICS = [("weights_int8_per_channel", "PyTorch, weights int8 per channel"),
               ("weights_int8_folded_per_tensor", "PyTorch, tpu-sim's weights (BN folded, int8 per tensor)"),
               ("input_noise_1pct", "PyTorch, input + 1% noise"),
               ("other_inputs", "PyTorch, other inputs")]


def fmt_bytes(b):
    if b is None:
        return ""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b} B"


def fmt_top1(row, total=None):
    if row.get("top1_agreement") is None:
        return ""
    total = total or row["top1_positions"]
    if total <= 16:
        return f"{round(row['top1_agreement'] * total)}/{total}"
    return f"{100 * row['top1_agreement']:.1f}% of {total}"


def fmt_wall(row):
    if "wall_seconds" not in row:
        return ""
    return f"{row['wall_seconds']:.1f}" if row["wall_seconds"] >= 1 else f"{row['wall_seconds']:.2f}"


def label(row):
    return f"{row['model']} ({row['family']})" if row.get("family") else row["model"]


def shape(row):
    return "x".join(str(v) for v in row.get("input_shape", []))


def table(rows):
    lines = ["| model | input | ran | cycles | ms at 700 MHz | TOPS | utilization (useful) | weights int8 "
             "| weight bytes read | wall s | peak RSS | correlation | input-dependent correlation | top-1 agree "
             "| bit-exact |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        head = f"| {label(r)} | {shape(r)} |"
        if not r.get("ran"):
            lines.append(f"{head} no: {r.get('reason', '')} | | | | | | | {fmt_wall(r)} "
                         f"| {fmt_bytes(r.get('peak_rss_bytes'))} | | | | |")
            continue
        exact = {True: "yes", False: f"no ({r.get('differing_outputs')} differ)", None: "reference failed"}[
            r.get("bit_exact")]
        corr = f"{r['correlation']:.4f}" + ("" if r["correlation"] >= MIN_CORRELATION else " (*)")
        lines.append(
            f"{head} yes | {r['cycles']:,} | {r['ms_at_700mhz']:.2f} | {r['useful_tops']:.2f} "
            f"| {100 * r['utilization']:.1f}% ({100 * r['useful_utilization']:.1f}%) "
            f"| {fmt_bytes(r['int8_weight_bytes'])} | {fmt_bytes(r['weight_bytes_read'])} | {fmt_wall(r)} "
            f"| {fmt_bytes(r.get('peak_rss_bytes'))} | {corr} | {r['input_dependent_correlation']:.3f} "
            f"| {fmt_top1(r)} | {exact} |")
    return "\n".join(lines)


def triple(c, positions):
    return f"{c['correlation']:.4f} / {c['input_dependent_correlation']:.3f} / {fmt_top1(c, positions)}"


def diagnostics_table(rows):
    lines = ["| model | input | tpu-sim int8 | " + " | ".join(title for _, title in DIAGNOSTICS) + " |",
             "|---|---|" + "---:|" * (1 + len(DIAGNOSTICS))]
    for r in rows:
        diag = r.get("diagnostics")
        if not diag:
            continue
        positions = r.get("top1_positions") or r.get("batch", 1)
        ours = triple(r, positions) if r.get("ran") else "not run"
        lines.append(f"| {r['model']} | {shape(r)} | {ours} | "
                     + " | ".join(triple(diag[key], positions) for key, _ in DIAGNOSTICS) + " |")
    return "\n".join(lines)


def notes(rows):
    out = []
    for r in rows:
        what = f"`{r['model']}` at {shape(r)}"
        if not r.get("ran"):
            cost = ""
            if "wall_seconds" in r:
                cost = (f" (after {r['wall_seconds']:.0f} s, {r.get('user_seconds', 0):.0f} s of CPU, and "
                        f"{fmt_bytes(r.get('peak_rss_bytes'))})")
            out.append(f"- {what}: not run: tpu-sim exited with status {r.get('exit_status', '?')}{cost}: "
                       f"`{r.get('reason', '')}`.")
            continue
        diag = r.get("diagnostics", {})
        items = []
        if r.get("bit_exact") is False:
            items.append(f"{r.get('differing_outputs')} outputs differ from the NumPy int8 reference")
        if r.get("bit_exact") is None:
            items.append(f"the NumPy int8 reference failed: `{r.get('reference_error', '')}`")
        if r["correlation"] < MIN_CORRELATION and diag:
            pc, pt = diag["weights_int8_per_channel"], diag["weights_int8_folded_per_tensor"]
            noise = diag["input_noise_1pct"]
            items.append(
                f"correlation {r['correlation']:.4f}, below {MIN_CORRELATION}; the network itself is that fragile: "
                f"PyTorch with nothing but its weights rounded to int8 correlates {pc['correlation']:.4f} "
                f"(per output channel) and {pt['correlation']:.4f} (tpu-sim's: batch norms folded, per tensor) with "
                f"its float output, and {noise['correlation']:.4f} on the inputs plus 1% noise")
        if r["top1_agreement"] < 1.0 and diag:
            noise = diag["input_noise_1pct"]
            items.append(f"top-1 agrees on {fmt_top1(r)}; PyTorch's own top-1 on the inputs plus 1% noise "
                         f"agrees on {fmt_top1(noise, r['top1_positions'])}, with tpu-sim's weights on "
                         f"{fmt_top1(diag['weights_int8_folded_per_tensor'], r['top1_positions'])}")
        if r.get("warnings"):
            items.append("tpu-sim warns: " + "; ".join(f"`{w}`" for w in r["warnings"][:3]))
        if items:
            out.append(f"- {what}: " + "; ".join(items) + ".")
    return out


def names(rows):
    """`a` at 224, `b` at 224 and `c` at 299 (sizes only where a model is listed at several)."""
    if not rows:
        return "none"
    items = [f"{r['model']} ({shape(r).split('x')[-1]})" for r in rows]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def span(values, fmt="{:.3f}"):
    values = [v for v in values if v == v]
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)} to {fmt.format(hi)}"


def markdown(doc):
    rows, s, m = doc["models"], doc["settings"], doc["machine"]
    ran = [r for r in rows if r.get("ran")]
    exact = [r for r in ran if r.get("bit_exact")]
    good = [r for r in ran if r["correlation"] >= MIN_CORRELATION]
    # The deep torchvision networks (every model with batch norms but the two small test nets).
    deep = [r for r in rows if r.get("diagnostics") and r.get("family") not in ("UNet-style", "Conv1d", "(self-test)")]
    other = [r["diagnostics"]["other_inputs"]["correlation"] for r in deep]
    noise_dep = [r["diagnostics"]["input_noise_1pct"]["input_dependent_correlation"] for r in deep]
    ours_dep = [r["input_dependent_correlation"] for r in deep if r.get("ran")]
    loads = [r["load_average"] for r in rows if "load_average" in r]
    load = span(loads, "{:.1f}") if loads else m["load_average_at_start"][0]
    timers = " and ".join(f"`{t}`" for t in sorted({r["timer"] for r in rows if "timer" in r})) or "`/usr/bin/time -v`"
    times = sorted(r["measured_at"] for r in rows if "measured_at" in r) or [doc["date"]]
    when = times[0] if times[0] == times[-1] else f"between {times[0]} and {times[-1]}"
    parts = [
        "# Model zoo on tpu-sim",
        "",
        "<!-- Generated by bench/model_zoo.py (bench/zoo_report.py); edit the scripts, not this file. -->",
        "",
        "One model of each torchvision classification family, a UNet-style net and a Conv1d net "
        "(the definitions of tests/onnx/make_r1d_models.py), exported to ONNX by PyTorch "
        f"{s['torch']} (torchvision {s['torchvision']}, `weights=None`: random weights, nothing downloaded; "
        f"opset {s['opset']}) and run by `tpu-sim net` on the stock `{s['preset']}` preset, with no "
        "`--config` override ([onnx.md](onnx.md) describes the import and the quantization).",
        "",
        f"**How.** `bench/model_zoo.py` exports each model (`bench/zoo_export.py`) with {s['calib_batch']} random "
        f"normal inputs as the calibration set and {s['batch']} others as the evaluation batch (fixed seeds), "
        "and runs",
        "",
        "```sh",
        "tpu-sim net model.onnx --calibrate calib.npy --input x.npy --out y.npy --save-model q "
        f"--stats s.json --preset {s['preset']}",
        "```",
        "",
        "under `/usr/bin/time -v`; then `tools/int8_reference.py`, the independent NumPy int8 reference, runs "
        "the saved model `q/model.json` on the same batch.",
        "",
        "**Random weights need batch-norm statistics.** With torchvision's fresh batch norms (running mean 0, "
        "variance 1, scale 1, shift 0) the activations of a random-weight network grow or die layer after "
        "layer, and any comparison of outputs becomes trivial. So, as tests/onnx/make_models.py does, each "
        "BatchNorm gets a random scale in [0.5, 1.5] and a shift from N(0, 0.2), and its running statistics "
        f"are measured by {s['batchnorm_passes']} forward passes in train mode on {s['batchnorm_batch']} random "
        "inputs each, before the model is put in eval mode and exported. AlexNet, VGG-16 and SqueezeNet have no "
        "batch norms and keep torchvision's initialization.",
        "",
        f"**Columns.** *cycles*: the whole evaluation batch of {s['batch']} (every program: the stats JSON's "
        "`total.cycles`); *ms at 700 MHz*: those cycles at TPUv1's clock; *TOPS*: 2 x the layers' useful MACs "
        "per second at 700 MHz; *utilization*: the array's MACs over cycles x N² (padding lanes, bias passes "
        "and diagonal tiles included), the useful MACs' share in parentheses; *weights int8*: the quantized "
        "model's weights (`q/*.npy`); *weight bytes read*: the layers' `weight_bytes` in the stats (tiles read "
        "from weight memory, reloads included); *wall s* and *peak RSS*: tpu-sim's whole run (ONNX import, "
        f"calibration, compile, simulation) by {timers}, on a {m['cpus']}-core {m['cpu'] or 'machine'} "
        f"shared with other engineers' builds (1-minute load average {load} as each run started): wall "
        "times are "
        "rough; *correlation*: of tpu-sim's output (int8, dequantized) with PyTorch's float output over all "
        f"outputs of the batch ((*): below {MIN_CORRELATION}); *input-dependent correlation*: the same after "
        "subtracting from each output its mean over the batch (see below); *top-1 agree*: argmax over the "
        "classes equal to PyTorch's (the UNet: over its 2 output maps at each pixel); *bit-exact*: tpu-sim's "
        "output equals the NumPy reference's int8 output, dequantized with the same scale, element for element.",
        "",
        f"Measured {when}, reported {doc['date']} by bench/model_zoo.py at commit `{doc['commit']}`, with a "
        "tpu-sim binary "
        f"built {doc.get('tpu_sim_built', '?')} (SHA-256 `{doc['tpu_sim_sha256'][:12]}`): {len(ran)} of "
        f"{len(rows)} models ran, {len(exact)} of them bit-exact, "
        f"{len(good)} with correlation >= {MIN_CORRELATION}.",
        "",
        table(rows),
        "",
    ]
    if deep:
        n_deep = len(deep)
        trivial = sum(1 for r in deep if r["diagnostics"]["other_inputs"]["correlation"] >= MIN_CORRELATION)
        same_top1 = sum(1 for r in deep if r["diagnostics"]["other_inputs"]["top1_agreement"] >= 0.75)
        noise_dep = [r["diagnostics"]["input_noise_1pct"]["input_dependent_correlation"] for r in deep]
        weights_dep = [r["diagnostics"]["weights_int8_folded_per_tensor"]["input_dependent_correlation"] for r in deep]
        channel_dep = [r["diagnostics"]["weights_int8_per_channel"]["input_dependent_correlation"] for r in deep]
        fragile = [r for r in deep if r["diagnostics"]["input_noise_1pct"]["input_dependent_correlation"] < 0.9]
        activation_cost = [r for r in deep if r.get("ran") and r["input_dependent_correlation"] < r["diagnostics"][
            "weights_int8_folded_per_tensor"]["input_dependent_correlation"] - 0.1]
        parts += [
            "## What the correlation says about a random-weight network",
            "",
            "A random-weight network's output is mostly a per-class offset that hardly depends on the input "
            "(the pattern of its biases and batch-norm shifts), and its top class is often the same for every "
            f"input. PyTorch's float output on {s['batch']} *other* random inputs correlates {span(other)} with "
            f"its output on the evaluation batch for the {n_deep} torchvision models ({trivial} of them at "
            f"{MIN_CORRELATION} or more), and agrees on the top-1 class of at least 3 of the {s['batch']} inputs "
            f"for {same_top1} of them: an output that ignored its input would pass the bar. So the table has "
            "the *input-dependent correlation* too: each output minus its mean over the batch, against "
            f"PyTorch's likewise (with {s['batch']} inputs a rough figure); tpu-sim reaches {span(ours_dep)} "
            "on the torchvision models.",
            "",
            "The table below perturbs PyTorch's float model one way at a time. Gaussian noise of 1% of the "
            f"inputs' standard deviation leaves an input-dependent correlation of {span(noise_dep)}; "
            f"{names(fragile)} keep less than 0.9 of it: these random networks amplify any perturbation, and "
            "int8 perturbs far more than 1%. tpu-sim's weights alone (batch norms folded into the "
            "convolutions, then int8 per tensor; nothing else quantized) leave "
            f"{span(weights_dep)}, rounding per output channel before folding {span(channel_dep)}. The rest "
            "of the gap to tpu-sim is the int8 activations (one scale per tensor, from the calibration's "
            "ranges) and the requantizations; it is largest (more than 0.1) for "
            f"{names(activation_cost)}. With random weights, then, the input-dependent part of the output "
            "mostly does not survive int8 quantization at all, in PyTorch as in tpu-sim; trained weights (not "
            "downloadable here) would be the test of the quantization's accuracy. What this report checks "
            "sharply is the simulator: bit-exactness against the NumPy reference, and, through the "
            "correlation, that the import reads each network as PyTorch does.",
            "",
            "Each cell: correlation / input-dependent correlation / top-1 agreement with PyTorch's float output "
            "on the evaluation batch. *weights int8 per channel*: only the Conv and Linear weights rounded to "
            "int8 (symmetric) per output channel, before folding the batch norms (docs/onnx.md's measure); "
            "*tpu-sim's weights*: each BatchNorm folded into the Conv before it (torch.fx), then the weights "
            "rounded per tensor (a BatchNorm after no Conv, as in DenseNet: its multiplier per tensor); "
            "*input + 1% noise*: PyTorch on the inputs plus Gaussian noise of 1% of their standard deviation; "
            "*other inputs*: PyTorch on other random inputs.",
            "",
            diagnostics_table(rows),
            "",
        ]
    n = notes(rows)
    if n:
        parts += ["## Notes", "", *n, ""]
    parts += [
        "## Sequence models",
        "",
        "Recurrent networks (PyTorch's `nn.LSTM` and `nn.GRU`, an LSTM language-model-like net, and the TPUv1 "
        "paper's LSTM0 and LSTM1 rebuilt as LSTMs) are on their own page, [sequence_models.md](sequence_models.md), "
        "which this script does not generate.",
        "",
    ]
    # The sections measured by other tests (transformer layers), written by hand.
    parts += [HANDWRITTEN.read_text().rstrip("\n"), ""]
    parts += [
        "## Regenerating",
        "",
        "```sh",
        "nice -n 15 bench/model_zoo.py --tpu-sim build/sim/tpu-sim     # every model: docs/models.md, bench/model_zoo.json",
        "nice -n 15 bench/model_zoo.py --models resnet50,inception_v3@224 --out /tmp/m.md --json /tmp/m.json",
        "bench/model_zoo.py --self-test --tpu-sim build/sim/tpu-sim    # CTest onnx.model_zoo: a small end-to-end check",
        "```",
        "",
        "Exports and results are cached in `build/model_zoo/MODEL@SIZE/` (`--cache`): a result is reused "
        "while the export, the tpu-sim binary (its SHA-256), the preset and the reference script are "
        "unchanged; `--force` runs every model again, `--force-export` exports them again too. The report is "
        "rewritten after each model, so an interrupted run keeps what it measured. `bench/model_zoo.json` "
        "holds every figure above and more (array and useful MACs, programs, user and system seconds, the "
        "reference's time, tpu-sim's warnings). Models run one at a time: tpu-sim took up to "
        f"{max([r['wall_seconds'] for r in rows if 'wall_seconds' in r] or [0]):.0f} s and "
        f"{fmt_bytes(max([r['peak_rss_bytes'] for r in rows if 'peak_rss_bytes' in r] or [0]))} here, the "
        "NumPy reference up to "
        f"{max([r['reference_seconds'] for r in rows if 'reference_seconds' in r] or [0]):.0f} s.",
        "",
    ]
    return "\n".join(parts)
