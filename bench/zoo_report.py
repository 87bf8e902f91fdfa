"""docs/models.md from the model zoo's results (bench/model_zoo.py): the intro, the table of
measurements, what a correlation means for a random-weight network, notes per model where
something is off, and how to regenerate. Every figure comes from the results; nothing is typed in.
"""

MIN_CORRELATION = 0.95  # issue 28's bar for tpu-sim's int8 output against PyTorch's float output
DIAGNOSTICS = [("weights_int8_per_channel", "PyTorch, weights int8 per channel"),
               ("weights_int8_per_tensor", "PyTorch, weights int8 per tensor"),
               ("input_noise_1pct", "PyTorch, input + 1% noise"),
               ("other_inputs", "PyTorch, other inputs")]


def fmt_bytes(b):
    if b is None:
        return ""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b} B"


def fmt_top1(row):
    if row.get("top1_agreement") is None:
        return ""
    total = row["top1_positions"]
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


def pair(c):
    return f"{c['correlation']:.4f} / {c['input_dependent_correlation']:.3f}"


def diagnostics_table(rows):
    lines = ["| model | input | tpu-sim int8 | " + " | ".join(title for _, title in DIAGNOSTICS) + " |",
             "|---|---|" + "---:|" * (1 + len(DIAGNOSTICS))]
    for r in rows:
        diag = r.get("diagnostics")
        if not diag:
            continue
        ours = pair(r) if r.get("ran") else "not run"
        lines.append(f"| {r['model']} | {shape(r)} | {ours} | "
                     + " | ".join(pair(diag[key]) for key, _ in DIAGNOSTICS) + " |")
    return "\n".join(lines)


def notes(rows):
    out = []
    for r in rows:
        what = f"`{r['model']}` at {shape(r)}"
        if not r.get("ran"):
            out.append(f"- {what}: not run (exit status {r.get('exit_status', '?')}): `{r.get('reason', '')}`.")
            continue
        diag = r.get("diagnostics", {})
        items = []
        if r.get("bit_exact") is False:
            items.append(f"{r.get('differing_outputs')} outputs differ from the NumPy int8 reference")
        if r.get("bit_exact") is None:
            items.append(f"the NumPy int8 reference failed: `{r.get('reference_error', '')}`")
        if r["correlation"] < MIN_CORRELATION and diag:
            pc, pt = diag["weights_int8_per_channel"], diag["weights_int8_per_tensor"]
            noise = diag["input_noise_1pct"]
            items.append(
                f"correlation {r['correlation']:.4f}, below {MIN_CORRELATION}. The network alone is as fragile: "
                f"PyTorch with nothing but its Conv and Linear weights rounded to int8 reaches "
                f"{pc['correlation']:.4f} per output channel and {pt['correlation']:.4f} per tensor (tpu-sim "
                f"rounds per tensor, after folding the batch norms, and quantizes every activation too), and "
                f"PyTorch on the inputs plus 1% noise {noise['correlation']:.4f}")
        if r["top1_agreement"] < 1.0 and diag:
            noise = diag["input_noise_1pct"]
            items.append(f"top-1 agrees on {fmt_top1(r)}; PyTorch itself, on the inputs plus 1% noise, keeps "
                         f"{100 * noise['top1_agreement']:.0f}% of its top-1 (input-dependent correlation "
                         f"{noise['input_dependent_correlation']:.3f})")
        if r.get("warnings"):
            items.append("tpu-sim warns: " + "; ".join(f"`{w}`" for w in r["warnings"][:3]))
        if items:
            out.append(f"- {what}: " + "; ".join(items) + ".")
    return out


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
    load = m["load_average_at_start"][0]
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
        f"calibration, compile, simulation) by `/usr/bin/time -v`, on a {m['cpus']}-core {m['cpu'] or 'machine'} "
        f"shared with other engineers' builds (load average {load} when the run started): wall times are "
        "rough; *correlation*: of tpu-sim's output (int8, dequantized) with PyTorch's float output over all "
        f"outputs of the batch ((*): below {MIN_CORRELATION}); *input-dependent correlation*: the same after "
        "subtracting from each output its mean over the batch (see below); *top-1 agree*: argmax over the "
        "classes equal to PyTorch's (the UNet: over its 2 output maps at each pixel); *bit-exact*: tpu-sim's "
        "output equals the NumPy reference's int8 output, dequantized with the same scale, element for element.",
        "",
        f"Measured {doc['date']} at commit `{doc['commit']}` (tpu-sim binary SHA-256 "
        f"`{doc['tpu_sim_sha256'][:12]}`): {len(ran)} of {len(rows)} models ran, {len(exact)} of them bit-exact, "
        f"{len(good)} with correlation >= {MIN_CORRELATION}.",
        "",
        table(rows),
        "",
    ]
    if deep:
        parts += [
            "## What the correlation says about a random-weight network",
            "",
            "A random-weight network's output is mostly a per-class offset that hardly depends on the input "
            "(the fixed pattern of its biases and batch-norm shifts). PyTorch's float output on "
            f"{s['batch']} *other* random inputs correlates {span(other)} with its output on the evaluation "
            f"batch for the torchvision models: a correlation of {MIN_CORRELATION} with PyTorch says that the "
            "import and the quantization keep that offset, and little about the part of the output that the "
            "input decides. That part is what the *input-dependent correlation* measures (each output minus "
            "its mean over the batch; with a batch of "
            f"{s['batch']} a rough figure). It is low for tpu-sim ({span(ours_dep)} for the torchvision models) "
            "because these deep random networks amplify any perturbation: PyTorch's own float output on the "
            "same inputs plus Gaussian noise of 1% of their standard deviation keeps an input-dependent "
            f"correlation of only {span(noise_dep)}. int8 quantization perturbs much more than 1%, so neither "
            "the top-1 agreement nor the input-dependent correlation can be high for these networks; trained "
            "weights (not downloadable here) would be the real test. The bit-exactness against the NumPy "
            "reference is the sharp check of the simulator; the correlation checks the import "
            "(layouts, operators) and the quantization's overall scale.",
            "",
            "Each cell: correlation / input-dependent correlation with PyTorch's float output on the evaluation "
            "batch. *PyTorch, weights int8*: only its Conv and Linear weights rounded to int8 (symmetric, before "
            "folding the batch norms), nothing else quantized; *input + 1% noise*: PyTorch on the inputs plus "
            "Gaussian noise of 1% of their standard deviation; *other inputs*: PyTorch on other random inputs.",
            "",
            diagnostics_table(rows),
            "",
        ]
    n = notes(rows)
    if n:
        parts += ["## Notes", "", *n, ""]
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
        "reference's time, the diagnostics' top-1 agreements, tpu-sim's warnings). Models run one at a time; "
        "the largest take a minute or two and 1.5 GiB each.",
        "",
    ]
    return "\n".join(parts)
