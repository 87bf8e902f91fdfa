"""Shared fixtures of the tpusim tests (tests/python/CMakeLists.txt sets the environment)."""
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("TPU_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


@pytest.fixture(scope="session")
def tpu_sim():
    """The tpu-sim binary of the same build."""
    bin_dir = os.environ.get("TPUSIM_BIN_DIR")
    if not bin_dir:
        pytest.skip("TPUSIM_BIN_DIR is not set (run through CTest)")
    return str(pathlib.Path(bin_dir) / "tpu-sim")


def pytest_sessionfinish(session, exitstatus):
    """Every test skipped (e.g. python3-distributed missing): exit 5, which
    CTest reports as skipped (SKIP_RETURN_CODE) rather than passed."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    stats = reporter.stats
    if stats.get("skipped") and not stats.get("passed") and not stats.get("failed"):
        session.exitstatus = 5
