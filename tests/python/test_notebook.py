"""docs/notebook.py end to end, as a user runs it: tpusim from the build, a
GEMM and a network, a sweep of N = 16..256 x three workloads on a local Dask
cluster of two worker processes, a --timeline trace and the four plots."""
import json
import pathlib
import subprocess
import sys

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("distributed")
matplotlib = pytest.importorskip("matplotlib")
import matplotlib.image  # noqa: E402


def test_notebook(source_dir, tpu_sim, tmp_path):
    build = pathlib.Path(tpu_sim).parent.parent  # BUILD/sim/tpu-sim
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(source_dir / "docs" / "notebook.py"), str(out),
                        "--build", str(build)],
                       capture_output=True, text=True, timeout=500, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    # The sweep: 5 sizes x 3 workloads, every run measured.
    df = pd.read_csv(out / "sweep.csv", keep_default_na=False, na_values=[""])
    assert sorted(df.array_n.unique()) == [16, 32, 64, 128, 256]
    assert df.workload.nunique() == 3 and len(df) == 15
    assert (df.status == "ok").all(), df[df.status != "ok"].error.tolist()
    assert "sweep: 15 runs on 2 worker processes" in p.stdout
    # The timeline is a Chrome trace.
    t = json.loads((out / "mlp2.timeline.json").read_text())
    assert t["otherData"]["clock_mhz"] > 0 and any(e["ph"] == "X" for e in t["traceEvents"])
    # Four plots, each a real picture.
    for name in ("layers", "roofline", "timeline", "sweep"):
        png = out / f"{name}.png"
        assert f"plot: {png.relative_to(tmp_path)}" in p.stdout or f"plot: {png}" in p.stdout
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10 * 1024
        h, w = matplotlib.image.imread(png).shape[:2]
        assert w > 500 and h > 300
