"""benchmarks/peers/bench_compare.py in quick mode, so the peer comparison never rots (its figures are not checked)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

ROOT = pathlib.Path(ROOT_DIR)
PEERS = ["adiskq", "adiskq-py", "sqlite-wal", "redis-streams", "persist-queue", "litequeue"]
THROUGHPUT = ["single", "batch", "durable32", "read"]
KEYED_PEERS = ["adiskq", "adiskq-py", "sqlite-wal", "redis-streams"]
KEYED_THROUGHPUT = ["single_keyed", "batch_keyed", "durable32_keyed", "read_keyed"]
LONG_READERS = ["adiskq", "adiskq-py", "sqlite-wal"]  # Redis does not read back the long log


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, str]:
    out = tmp_path_factory.mktemp("compare")
    done = subprocess.run(
        [sys.executable, "benchmarks/peers/bench_compare.py", "--quick", "--out", os.fspath(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=270,  # ~1 minute on 2 quiet cores; 2.5 on the same cores with 9 other jobs running
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout


@pytest.mark.timeout(300)
def test_quick_mode_measures_every_peer_on_every_workload(quick_run: tuple[pathlib.Path, str]) -> None:
    """Every peer gets a positive figure for every workload, and the table shows their ratios to adiskq."""
    out, printed = quick_run
    report = json.loads((out / "compare.json").read_text())
    for peer in PEERS:
        for workload in THROUGHPUT:
            assert report["summary"][peer][workload] > 0, (peer, workload)
        assert 0 < report["summary"][peer]["latency_p50_us"] <= report["summary"][peer]["latency_p99_us"]
        assert len(report["latency_samples_us"][peer]) == 1001
        assert report["summary"][peer]["disk_bytes_per_message"] > 0
        assert report["summary"][peer]["rss_peak_mib"] > 0
    assert "×)" in printed
    assert all(peer in printed for peer in PEERS)


@pytest.mark.timeout(300)
def test_quick_mode_writes_the_chart_and_the_results_section(quick_run: tuple[pathlib.Path, str]) -> None:
    """The run saves a PNG chart and a RESULTS.md section holding the table, the chart and the command."""
    out, _ = quick_run
    assert (out / "compare.png").read_bytes().startswith(b"\x89PNG")
    section = (out / "RESULTS.md").read_text()
    assert "python benchmarks/peers/bench_compare.py --quick" in section
    assert "![" in section
    assert "(compare.png)" in section
    assert "| single producer, msg/s |" in section
    assert "| push → consumer p99, µs |" in section


@pytest.mark.timeout(300)
def test_redraw_rebuilds_the_same_results_section_from_compare_json(
    quick_run: tuple[pathlib.Path, str], tmp_path: pathlib.Path
) -> None:
    """--redraw measures nothing and writes the same RESULTS section and a chart from a saved compare.json."""
    out, _ = quick_run
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/peers/bench_compare.py",
            "--redraw",
            os.fspath(out / "compare.json"),
            "--out",
            os.fspath(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "RESULTS.md").read_text() == (out / "RESULTS.md").read_text()
    assert (tmp_path / "compare.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.timeout(300)
def test_quick_mode_measures_the_keyed_workloads_against_their_targets(
    quick_run: tuple[pathlib.Path, str],
) -> None:
    """The distinct-key table: adiskq, SQLite and Redis measured on each keyed workload, both adiskq
    cores on batches() and on the long read too, bytes on disk per message for each, and every row
    with a target judged met or missed for each adiskq core."""
    out, printed = quick_run
    report = json.loads((out / "compare.json").read_text())
    summary = report["summary"]
    for peer in KEYED_PEERS:
        for workload in KEYED_THROUGHPUT:
            assert summary[peer][workload] > 0, (peer, workload)
        assert 0 < summary[peer]["latency_keyed_p50_us"] <= summary[peer]["latency_keyed_p99_us"]
        assert summary[peer]["rss_single_keyed_mib"] > 0
        assert summary[peer]["disk_keyed_bytes_per_message"] > 0
    for peer in LONG_READERS:
        assert summary[peer]["read_keyed_long"] > 0
    for core in ("adiskq", "adiskq-py"):
        assert summary[core]["read_keyed_batches"] > 0
    for peer in ("persist-queue", "litequeue"):  # queues without keys sit the keyed workloads out
        assert "single_keyed" not in summary[peer]
    assert report["meta"]["cores"]["adiskq-py"] == "python"  # ADISKQ_NO_EXTENSIONS=1 reached it
    keyed_table = printed.split("distinct keys, against their targets", 1)[1]
    rows = [line for line in keyed_table.splitlines() if line.startswith(("W1", "W2", "W3", "W4", "W5", "peak"))]
    assert len(rows) == 9
    assert all(row.count(" met") + row.count(" missed") == 3 for row in rows), rows  # adiskq, adiskq-trio, adiskq-py
    section = (out / "RESULTS.md").read_text()
    assert "<!-- bench_compare_keyed:begin" in section
    assert "| W1 one producer, await each push (2,000), msg/s |" in section
    assert "| W4 read back 20,000 in order, async for, msg/s |" in section
    assert "| bytes on disk per message (W2's log) |" in section
    assert "≥ 4.3× sqlite-wal" in section


@pytest.mark.timeout(60)
def test_keyed_alone_leaves_the_keyless_results_alone(tmp_path: pathlib.Path) -> None:
    """--keyed runs only the keyed table: it saves compare_keyed.json and its own RESULTS.md section,
    and neither compare.json nor the keyless section."""
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nkept by hand\n")
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/peers/bench_compare.py",
            "--quick",
            "--keyed",
            "--peers",
            "adiskq,sqlite-wal",
            "--workloads",
            "single_keyed,read_keyed_batches",
            "--out",
            os.fspath(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (tmp_path / "compare.json").exists()
    report = json.loads((tmp_path / "compare_keyed.json").read_text())
    assert report["summary"]["adiskq"]["single_keyed"] > 0
    assert report["summary"]["adiskq"]["read_keyed_batches"] > 0
    text = results.read_text()
    assert "kept by hand" in text
    assert "<!-- bench_compare_keyed:begin" in text
    assert "<!-- bench_compare:begin" not in text


def _bench_compare(*arguments: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """bench_compare.py run with no go-diskq checkout in its environment."""
    env = {name: value for name, value in os.environ.items() if name != "ADISKQ_GO_DISKQ_SRC"}
    return subprocess.run(
        [sys.executable, "benchmarks/peers/bench_compare.py", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(120)
def test_without_a_go_diskq_checkout_the_run_says_what_go_diskq_sat_out(tmp_path: pathlib.Path) -> None:
    """Go's module proxy refuses go-diskq, so a run without a checkout leaves it out, says so, names
    the workloads and says how to include it, and still measures the other peers."""
    done = _bench_compare(
        "--quick", "--keyed", "--workloads", "single_keyed,batch_keyed", "--out", os.fspath(tmp_path), timeout=110
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "go-diskq left out of single_keyed: Go's module proxy refuses github.com/wcharczuk/go-diskq" in done.stderr
    assert "clone https://github.com/wcharczuk/go-diskq and pass its path with --go-diskq-src PATH" in done.stderr
    report = json.loads((tmp_path / "compare_keyed.json").read_text())
    assert "go-diskq" not in report["summary"]
    assert report["summary"]["sqlite-wal"]["single_keyed"] > 0
    assert "bench_compare_go_diskq:begin" not in (tmp_path / "RESULTS.md").read_text()


@pytest.mark.timeout(60)
def test_asking_for_go_diskq_without_a_checkout_is_refused_with_what_to_do(tmp_path: pathlib.Path) -> None:
    done = _bench_compare("--quick", "--keyed", "--peers", "adiskq,go-diskq", "--out", os.fspath(tmp_path), timeout=50)
    assert done.returncode == 2
    assert "go-diskq needs --go-diskq-src PATH (or ADISKQ_GO_DISKQ_SRC)" in done.stderr
    assert "clone https://github.com/wcharczuk/go-diskq" in done.stderr
    assert not (tmp_path / "compare_keyed.json").exists()


@pytest.mark.timeout(60)
def test_a_go_diskq_source_that_is_not_a_checkout_of_it_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "go.mod").write_text("module example.com/other\n")
    for source, said in ((tmp_path / "missing", "no go.mod there"), (tmp_path / "other", "not github.com/wcharczuk")):
        done = _bench_compare(
            "--quick", "--keyed", "--peers", "adiskq,go-diskq", "--go-diskq-src", os.fspath(source), timeout=50
        )
        assert done.returncode != 0
        assert said in done.stderr, done.stderr[-2000:]


def test_go_diskq_ratios_are_per_run_with_their_median_and_spread() -> None:
    """The go-diskq table: each run's own ratio adiskq ÷ go-diskq, the median of those and the lowest
    and highest, beside go-diskq's median figure."""
    spec = importlib.util.spec_from_file_location(
        "bench_compare_for_test", ROOT / "benchmarks" / "peers" / "bench_compare.py"
    )
    assert spec is not None
    assert spec.loader is not None
    bench_compare = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench_compare  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(bench_compare)
    finally:
        del sys.modules[spec.name]
    go_seconds = [1.0, 1.0, 2.0]  # 1,000 messages: go-diskq at 1,000, 1,000 and 500 msg/s
    adiskq_seconds = [0.5, 0.25, 1.0]  # adiskq at 2,000, 4,000, 1,000: ratios 2, 4, 2
    raw = [
        {
            "peer": peer,
            "workload": "single_keyed",
            "count": 1000,
            "seconds": seconds,
            "run": run,
            "rss_peak_bytes": 2**20,
        }
        for run in range(3)
        for peer, seconds in (("go-diskq", go_seconds[run]), ("adiskq", adiskq_seconds[run]))
    ]
    peers = ["adiskq", "go-diskq"]
    ratios = bench_compare.go_diskq_ratios(raw, peers)
    assert ratios["adiskq"]["single_keyed"] == [2.0, 4.0, 2.0]
    rows = bench_compare.go_diskq_rows(bench_compare.summarize(raw, peers), ratios, {"single_keyed": {"*": 1000}})
    assert rows[0][2:] == ["go-diskq", "adiskq (÷ go-diskq: median, lowest–highest)"]
    w1 = next(row for row in rows if row[0].startswith("W1"))
    assert w1[2:] == ["1,000", "2,000 (2.00×, 2.00×–4.00×)"]
