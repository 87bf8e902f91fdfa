#!/usr/bin/python3
"""The model zoo: one model of each torchvision classification family, a
UNet-style net and a Conv1d net, exported to ONNX with random weights
(bench/zoo_export.py), run with `tpu-sim net` on a preset (the stock `tpuv1`
by default) and checked, into a Markdown report (docs/models.md) and a JSON
file (bench/model_zoo.json).

For each model:

1. export (cached under --cache, default build/model_zoo/KEY/): model.onnx,
   4 calibration inputs, an evaluation batch of 4 other inputs and PyTorch's
   float output on it (zoo_export.py says how the batch-norm statistics of the
   random-weight nets are measured, and why);
2. `tpu-sim net model.onnx --calibrate calib.npy --input x.npy --out y.npy
   --save-model q --stats s.json --preset tpuv1` under `/usr/bin/time -v`
   (wall time and peak RSS); a model tpu-sim refuses is a row with ran = no
   and tpu-sim's one-line reason;
3. tools/int8_reference.py (the NumPy int8 reference) on the saved model:
   bit-exact when tpu-sim's output equals the reference's int8 output
   dequantized with the same scale (as tests/onnx/check_onnx_model.py
   checks it);
4. against PyTorch's float output (bench/zoo_metrics.py): the correlation of
   the whole output, the input-dependent correlation (each output minus its
   mean over the batch) and the top-1 agreement (argmax over classes; for the
   UNet's maps, over the channels of each pixel), beside the exporter's
   diagnostics (PyTorch with only its weights rounded to int8, with 1% input
   noise, on other inputs: what these figures mean for random weights);
5. from the stats JSON: cycles, ms at 700 MHz, TOPS of useful work, the
   array's utilization, and the bytes read from weight memory; the int8
   weights' size from the saved model.

bench/zoo_report.py writes the Markdown.

A model's result is cached beside its export (result.json) and reused while
the export, the tpu-sim binary (its SHA-256), the preset and the reference
script are unchanged; --force runs again, --force-export exports again too.

  bench/model_zoo.py [--models a,b@224,...] [--size S] [--preset tpuv1] [--batch 4]
                     [--out docs/models.md] [--json bench/model_zoo.json]
                     [--tpu-sim build/sim/tpu-sim] [--cache build/model_zoo] [--force]
  bench/model_zoo.py --self-test --tpu-sim PATH      # a small end-to-end check (CTest onnx.model_zoo)

A model is named as in torchvision (`inception_v3`), optionally with its input
size (`inception_v3@224`); a bare name of the zoo's list selects every size
listed for it. Run it under `nice` on a shared machine: the larger models take
minutes and gigabytes each, one at a time.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "onnx"))
from check_onnx_model import dequantized_reference, nhwc  # noqa: E402  the NumPy reference's layouts

sys.path.insert(0, str(ROOT / "bench"))
from zoo_metrics import compare  # noqa: E402
from zoo_report import fmt_bytes, fmt_top1, markdown  # noqa: E402

CLOCK_MHZ = 700
EXPORTER = ROOT / "bench" / "zoo_export.py"
GNU_TIME = "/usr/bin/time"
REFERENCE = ROOT / "tools" / "int8_reference.py"
RESULT_VERSION = 3  # part of the result cache key: change it when what a result holds changes

# (family, model, input size): one model per torchvision classification family, in the order of
# issue 28, Inception v3 at its own 299 and at 224; the UNet-style and Conv1d nets of tests/onnx.
ZOO = [
    ("ResNet", "resnet50", 224),
    ("AlexNet", "alexnet", 224),
    ("VGG", "vgg16", 224),
    ("SqueezeNet", "squeezenet1_1", 224),
    ("DenseNet", "densenet121", 224),
    ("GoogLeNet", "googlenet", 224),
    ("Inception v3", "inception_v3", 299),
    ("Inception v3", "inception_v3", 224),
    ("ShuffleNet v2", "shufflenet_v2_x1_0", 224),
    ("MobileNet v2", "mobilenet_v2", 224),
    ("MobileNet v3", "mobilenet_v3_large", 224),
    ("EfficientNet", "efficientnet_b0", 224),
    ("MNASNet", "mnasnet1_0", 224),
    ("RegNet", "regnet_y_400mf", 224),
    ("Wide ResNet", "wide_resnet50_2", 224),
    ("UNet-style", "unet", 64),
    ("Conv1d", "conv1d_net", 64),
]
FIXED_SIZE = {"conv1d_net": 64}  # its Linear head fixes the input length
FAMILY = {name: family for family, name, _ in ZOO}
FAMILY["softmax_probe"] = "(self-test)"


def key_of(name, size):
    return f"{name}@{size}"


def select(models_arg, size_override):
    """[(name, size)] from --models and --size."""
    if not models_arg:
        chosen = [(name, size) for _, name, size in ZOO]
    else:
        chosen = []
        for item in models_arg.split(","):
            item = item.strip()
            if not item:
                continue
            if "@" in item:
                name, size = item.split("@", 1)
                if not size.isdigit() or int(size) < 1:
                    sys.exit(f"model_zoo.py: error: --models: '{item}': the size after @ must be a positive integer")
                chosen.append((name, int(size)))
            else:
                sizes = [size for _, n, size in ZOO if n == item]
                chosen += [(item, s) for s in sizes] if sizes else [(item, 224)]
    chosen = [(n, FIXED_SIZE.get(n, size_override or size)) for n, size in chosen]
    seen, unique = set(), []
    for c in chosen:
        if c not in seen:
            seen.add(c)
            unique.append(c)
    return unique


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_atomic(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def time_v(path):
    """Wall seconds, peak RSS (bytes), user and system seconds from /usr/bin/time -v's output."""
    text = Path(path).read_text() if Path(path).exists() else ""
    out = {}
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    if m:
        seconds = 0.0
        for part in m.group(1).split(":"):
            seconds = seconds * 60 + float(part)
        out["wall_seconds"] = seconds
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["peak_rss_bytes"] = int(m.group(1)) * 1024
    for label, field in (("User time (seconds)", "user_seconds"), ("System time (seconds)", "system_seconds")):
        m = re.search(re.escape(label) + r": (\S+)", text)
        if m:
            out[field] = float(m.group(1))
    return out


def timed_run(cmd, run_dir, timeout):
    """Runs cmd (output into run_dir/stdout.txt and stderr.txt) under /usr/bin/time -v: exit status, wall
    seconds, peak RSS, user and system seconds; None after a timeout. Where /usr/bin/time is missing (Debian's
    package `time`), the same figures come from wait4's resource usage and a monotonic clock (its peak RSS is
    at least this script's own at the fork, some 30 MiB: a bound, not the figure, for the smallest models)."""
    gnu_time = Path(GNU_TIME).exists()
    argv = [GNU_TIME, "-v", "-o", str(run_dir / "time.txt"), *cmd] if gnu_time else cmd
    t0 = time.monotonic()
    with open(run_dir / "stdout.txt", "wb") as out, open(run_dir / "stderr.txt", "wb") as err:
        # In a session of its own, so that a timeout ends tpu-sim too, not only /usr/bin/time.
        proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - t0 > timeout:
                    os.killpg(proc.pid, signal.SIGTERM)
                    os.wait4(proc.pid, 0)
                    proc.returncode = -1  # reaped here: Popen must not wait for it
                    return None
                time.sleep(0.02)
        except BaseException:
            # Ctrl-C or SIGTERM (main turns it into SystemExit): the session's tpu-sim ends with this script.
            os.killpg(proc.pid, signal.SIGTERM)
            os.wait4(proc.pid, 0)
            proc.returncode = -1
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if gnu_time:
        result = {"timer": "/usr/bin/time -v", **time_v(run_dir / "time.txt")}
    else:
        result = {"timer": "wait4", "wall_seconds": round(time.monotonic() - t0, 2),
                  "peak_rss_bytes": usage.ru_maxrss * 1024, "user_seconds": usage.ru_utime,
                  "system_seconds": usage.ru_stime}
    result["exit_status"] = proc.returncode
    return result


def one_line_reason(stderr, onnx_path):
    """tpu-sim's error (or fault) line, with the cached model's path shortened to its file name."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and "warning:" not in ln]
    errors = [ln for ln in lines if ln.startswith("tpu-sim:")]
    line = (errors or lines or ["(no message)"])[-1]
    return line.replace(str(onnx_path), "model.onnx")


def export_version():
    """zoo_export.py's EXPORT_VERSION (read from its source: this script does not import torch's exporter)."""
    return int(re.search(r"^EXPORT_VERSION = (\d+)", EXPORTER.read_text(), re.M).group(1))


def export(name, size, d, batch, force):
    """The cached export of NAME at SIZE in folder d (made when missing or of another recipe)."""
    meta = read_json(d / "meta.json")
    want = {"name": name, "size": size, "batch": batch, "export_version": export_version()}
    if meta and not force and all(meta.get(k) == v for k, v in want.items()) and (d / "model.onnx").exists():
        return meta, False
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    r = subprocess.run([sys.executable, str(EXPORTER), name, str(size), str(d), "--batch", str(batch)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"export failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return read_json(d / "meta.json"), True


def run_key(meta, binary_sha, preset):
    return {"result_version": RESULT_VERSION, "export": meta, "tpu_sim_sha256": binary_sha, "preset": preset,
            "int8_reference_sha256": sha256(REFERENCE)}


def against_reference(y, q, model, input_ndim):
    """bit_exact and differing_outputs: tpu-sim's float output y against the NumPy reference's int8/int32
    output q (NHWC) dequantized with the saved model's output scale and zero point and put in the model's
    layout, as tests/onnx/check_onnx_model.py compares them."""
    want = dequantized_reference(q, model, input_ndim)
    if y.shape != want.shape:
        return {"bit_exact": False, "differing_outputs": int(y.size)}
    differ = int(np.sum(y != want))
    return {"bit_exact": differ == 0, "differing_outputs": differ}


def run_model(name, size, d, meta, tpu_sim, preset, timeout):
    """tpu-sim, the NumPy reference and the comparisons for one exported model: the result row."""
    row = {"model": name, "family": FAMILY.get(name, ""), "size": size, "input_shape": meta["input_shape"],
           "batch": meta["batch"], "parameters": meta["parameters"],
           "diagnostics": meta["diagnostics"]}
    row["measured_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    row["load_average"] = round(os.getloadavg()[0], 2)  # 1 minute, when tpu-sim starts
    run_dir = d / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    onnx_path = d / "model.onnx"
    cmd = [tpu_sim, "net", str(onnx_path), "--calibrate", str(d / "calib.npy"), "--input", str(d / "x.npy"),
           "--out", str(run_dir / "y.npy"), "--save-model", str(run_dir / "q"), "--stats", str(run_dir / "s.json"),
           "--preset", preset]
    row["command"] = " ".join(["tpu-sim", "net", "model.onnx", "--calibrate", "calib.npy", "--input", "x.npy",
                               "--out", "y.npy", "--save-model", "q", "--stats", "s.json", "--preset", preset])
    measured = timed_run(cmd, run_dir, timeout)
    if measured is None:
        row.update(ran=False, reason=f"tpu-sim did not finish within {timeout:g} s (the script's --timeout)")
        return row
    row.update(measured)
    r = subprocess.CompletedProcess(cmd, measured["exit_status"], (run_dir / "stdout.txt").read_text(),
                                    (run_dir / "stderr.txt").read_text())
    row["warnings"] = [ln.replace(str(onnx_path), "model.onnx") for ln in r.stderr.splitlines() if "warning:" in ln]
    if r.returncode != 0:
        row.update(ran=False, reason=one_line_reason(r.stderr, onnx_path))
        return row
    row["ran"] = True
    stats = json.loads((run_dir / "s.json").read_text())
    total = stats["total"]
    n = stats["array_n"]
    row.update(
        array_n=n, cycles=total["cycles"], programs=len(stats["programs"]),
        ms_at_700mhz=total["cycles"] / (CLOCK_MHZ * 1e3),
        useful_tops=2.0 * total["useful_macs"] / (total["cycles"] / (CLOCK_MHZ * 1e6)) / 1e12,
        array_macs=total["macs"], useful_macs=total["useful_macs"],
        utilization=total["utilization"], useful_utilization=total["useful_macs"] / (total["cycles"] * n * n),
        weight_bytes_read=sum(layer.get("weight_bytes", 0) for layer in stats["layers"]),
        layers=len(stats["layers"]))
    model = json.loads((run_dir / "q" / "model.json").read_text())
    row["int8_weight_bytes"] = int(sum(np.load(run_dir / "q" / layer["weights"], mmap_mode="r").nbytes
                                       for layer in model["layers"] if "weights" in layer))
    # The NumPy int8 reference on the saved model.
    x = np.load(d / "x.npy")
    np.save(run_dir / "x_nhwc.npy", nhwc(x))
    t0 = time.time()
    try:
        ref = subprocess.run([sys.executable, str(REFERENCE), str(run_dir / "q" / "model.json"),
                              "--input", str(run_dir / "x_nhwc.npy"), "--out", str(run_dir / "ref.npy")],
                             capture_output=True, text=True, timeout=timeout)
        ref_error = (ref.stderr.strip().splitlines() or ["?"])[-1] if ref.returncode != 0 else None
    except subprocess.TimeoutExpired:
        ref_error = f"did not finish within {timeout:g} s (the script's --timeout)"
    row["reference_seconds"] = round(time.time() - t0, 2)
    y, torch_y = np.load(run_dir / "y.npy"), np.load(d / "torch.npy")
    if ref_error:
        row["bit_exact"] = None
        row["reference_error"] = ref_error
    else:
        row.update(against_reference(y, np.load(run_dir / "ref.npy"), model, x.ndim))
    row.update(compare(y, torch_y))
    row["top1_positions"] = int(y.size // y.shape[1])
    row["max_error_of_max_y"] = float(np.max(np.abs(y - torch_y)) / np.max(np.abs(torch_y)))
    return row


def machine():
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    mem = 0
    try:
        mem = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) * 1024
    except (OSError, AttributeError):
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_bytes": mem, "load_average_at_start": [round(v, 2) for v in load],
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def git_commit():
    """HEAD's short hash, with "+changes" when tracked files (other than this report's) differ from it."""
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno", "--", ".",
                                ":!docs/models.md", ":!bench/model_zoo.json"], capture_output=True, text=True)
    except OSError:
        return ""
    if r.returncode != 0:
        return ""
    return r.stdout.strip() + ("+changes" if dirty.returncode == 0 and dirty.stdout.strip() else "")


# ---------------------------------------------------------------- driver


def export_only(args):
    """The exports alone (warming the cache before a tpu-sim binary exists)."""
    for name, size in select(args.models, args.size):
        t0 = time.time()
        meta, exported = export(name, size, Path(args.cache) / key_of(name, size), args.batch, args.force_export)
        diag = meta["diagnostics"]
        print(f"{key_of(name, size):<24} {'exported' if exported else 'cached':<8} {time.time() - t0:6.1f} s  "
              f"{meta['parameters']} parameters; PyTorch correlation, weights int8 per channel "
              f"{diag['weights_int8_per_channel']['correlation']:.4f}, input + 1% noise "
              f"{diag['input_noise_1pct']['correlation']:.4f}, other inputs "
              f"{diag['other_inputs']['correlation']:.4f}", flush=True)
    return 0


def run_zoo(args):
    tpu_sim = str(Path(args.tpu_sim).resolve())
    if not Path(tpu_sim).exists():
        sys.exit(f"model_zoo.py: error: {tpu_sim}: no such file (build tpu-sim or give --tpu-sim)")
    binary_sha = sha256(tpu_sim)
    cache = Path(args.cache)
    chosen = select(args.models, args.size)
    import torch  # noqa: F401  only for the versions in the report (the exports run in a child)
    import torchvision
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(), "tpu_sim": tpu_sim, "tpu_sim_sha256": binary_sha,
        "tpu_sim_built": datetime.datetime.fromtimestamp(Path(tpu_sim).stat().st_mtime, datetime.timezone.utc)
        .strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
        "settings": {"preset": args.preset, "batch": args.batch, "calib_batch": 4, "clock_mhz": CLOCK_MHZ,
                     "batchnorm_passes": 3, "batchnorm_batch": 8, "opset": 13,
                     "torch": torch.__version__, "torchvision": torchvision.__version__},
        "models": [],
    }
    for name, size in chosen:
        key = key_of(name, size)
        d = cache / key
        t0 = time.time()
        try:
            meta, exported = export(name, size, d, args.batch, args.force_export)
            want = run_key(meta, binary_sha, args.preset)
            old = read_json(d / "result.json")
            if old and not (args.force or args.force_export or exported) and old.get("key") == want:
                row, how = old["row"], "cached"
            else:
                row = run_model(name, size, d, meta, tpu_sim, args.preset, args.timeout)
                write_atomic(d / "result.json", json.dumps({"key": want, "row": row}, indent=1) + "\n")
                how = "ran"
        except Exception as e:  # noqa: BLE001  one model's failure is a row, the others still run
            row = {"model": name, "family": FAMILY.get(name, ""), "size": size, "input_shape": [size],
                   "ran": False, "reason": f"model_zoo.py: {type(e).__name__}: {e}"}
            how = "error"
        row["cached"] = how == "cached"
        doc["models"].append(row)
        if row.get("ran"):
            summary = (f"{row['cycles']} cycles, corr {row['correlation']:.4f} (input-dependent {row['input_dependent_correlation']:.3f}), top-1 {fmt_top1(row)}, "
                       f"bit-exact {row['bit_exact']}, wall {row.get('wall_seconds', 0):.1f} s, "
                       f"RSS {fmt_bytes(row.get('peak_rss_bytes'))}")
        else:
            summary = f"not run: {row.get('reason')}"
        print(f"{key:<24} {how:<6} {time.time() - t0:6.1f} s  {summary}", flush=True)
        # The report after every model: an interrupted run keeps what it measured.
        if args.json:
            write_atomic(args.json, json.dumps(doc, indent=1) + "\n")
        if args.out:
            write_atomic(args.out, markdown(doc))
    return doc


def self_test(args):
    """The script end to end on a small subset: a Conv1d net, SqueezeNet 1.1 at 66 x 66 and a refused model."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        a = argparse.Namespace(**vars(args))
        a.models, a.size, a.cache = "conv1d_net,squeezenet1_1@66,softmax_probe@8", None, str(t / "cache")
        a.out, a.json = str(t / "models.md"), str(t / "zoo.json")
        doc = run_zoo(a)
        rows = {r["model"]: r for r in doc["models"]}
        for name in ("conv1d_net", "squeezenet1_1"):
            r = rows.get(name, {})
            if not r.get("ran"):
                failures.append(f"{name} did not run: {r.get('reason')}")
                continue
            if r.get("bit_exact") is not True:
                failures.append(f"{name}: not bit-exact against int8_reference.py ({r.get('differing_outputs')} differ)")
            if not r["correlation"] >= 0.99:
                failures.append(f"{name}: correlation {r['correlation']:.4f} < 0.99")
            if "wall_seconds" not in r:
                failures.append(f"{name}: no wall time")
            for field in ("cycles", "useful_tops", "utilization", "weight_bytes_read", "int8_weight_bytes",
                          "peak_rss_bytes"):
                if not r.get(field, 0) > 0:
                    failures.append(f"{name}: {field} is {r.get(field)}")
        probe = rows.get("softmax_probe", {})
        if probe.get("ran") is not False or "Softmax" not in probe.get("reason", ""):
            failures.append(f"softmax_probe: expected a refusal naming Softmax, got {probe}")
        md = Path(a.out).read_text()
        for text in ("| conv1d_net (Conv1d) | 4x64 | yes |", "| squeezenet1_1 (SqueezeNet) | 3x66x66 | yes |",
                     "| softmax_probe ((self-test)) | 3x8x8 | no: tpu-sim: error:",
                     "[sequence_models.md](sequence_models.md)"):
            if text not in md:
                failures.append(f"models.md has no line with {text!r}")
        if json.loads(Path(a.json).read_text())["models"][0]["model"] != "conv1d_net":
            failures.append("the JSON's first model is not conv1d_net")
        # The checks see a difference: one output code off, and the outputs of another input.
        run = Path(a.cache) / "squeezenet1_1@66" / "run"
        if run.exists():
            y, q = np.load(run / "y.npy"), np.load(run / "ref.npy")
            model = json.loads((run / "q" / "model.json").read_text())
            q_off = q.copy()
            q_off.flat[7] += 1 if q_off.flat[7] < 127 else -1
            if against_reference(y, q_off, model, 4) != {"bit_exact": False, "differing_outputs": 1}:
                failures.append("one reference output changed by one code is not found")
            if against_reference(y, q, model, 4) != {"bit_exact": True, "differing_outputs": 0}:
                failures.append("against_reference differs from the run's own result")
            torch_y = np.load(run.parent / "torch.npy")
            shuffled = compare(y[::-1], torch_y)  # each output compared with another input's
            if not shuffled["input_dependent_correlation"] < 0.5:
                failures.append(f"outputs of other inputs give an input-dependent correlation of "
                                f"{shuffled['input_dependent_correlation']:.3f}")
        # A second run reuses every result.
        again = run_zoo(a)
        if not all(r.get("cached") for r in again["models"]):
            failures.append("a second run did not reuse the cached results")
    for f in failures:
        print("FAIL:", f)
    print("model_zoo self-test:", "FAIL" if failures else "OK")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated NAME or NAME@SIZE (default: the whole zoo)")
    ap.add_argument("--size", type=int, help="input size for every model (not conv1d_net, fixed at 64)")
    ap.add_argument("--preset", default="tpuv1")
    ap.add_argument("--batch", type=int, default=4, help="evaluation batch (calibration: 4 other inputs)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "models.md"), help="the Markdown report ('' for none)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "model_zoo.json"), help="the JSON results ('' for none)")
    ap.add_argument("--tpu-sim", default=str(ROOT / "build" / "sim" / "tpu-sim"))
    ap.add_argument("--cache", default=str(ROOT / "build" / "model_zoo"), help="exports and results")
    ap.add_argument("--force", action="store_true", help="run every model again (keep the exports)")
    ap.add_argument("--force-export", action="store_true", help="export and run every model again")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per tpu-sim run and per reference run")
    ap.add_argument("--self-test", action="store_true", help="a small end-to-end check of this script")
    ap.add_argument("--export-only", action="store_true", help="export the models into the cache, run nothing")
    args = ap.parse_args()
    # SIGTERM and SIGHUP as SystemExit, so that a running tpu-sim (in a session of its own) is ended too.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    if args.export_only:
        return export_only(args)
    if args.self_test:
        return self_test(args)
    run_zoo(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
