"""An optional part used without its extra is a usage error naming the ``pip install`` line, from
every entry point: an import in Python, and the command line (status 2, one line, no traceback).

Each case runs in a process whose imports of the extra's modules fail as they would where the extra
was never installed (a finder placed first on ``sys.meta_path`` refuses them).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Run the code of argv[2] where the top-level modules named in argv[1] (comma-separated) are missing.
RUNNER = textwrap.dedent(
    """
    import importlib.abc, sys

    missing = set(sys.argv[1].split(","))

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in missing:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    code = sys.argv[2]
    sys.argv = sys.argv[3:]
    exec(compile(code, "<case>", "exec"))
    """
)

IMPORTS = [
    ("kafka", "cramjam", "import adiskq.kafka"),
    ("kafka", "kio", "from adiskq.kafka import KafkaGateway"),
    ("kafka-cluster", "confluent_kafka", "from adiskq.kafka import Mirror"),
    ("spark", "pyspark", "import adiskq.spark"),
    ("otel", "opentelemetry", "import adiskq.otel"),
    ("msgspec", "msgspec", "import adiskq.serializers as s\nclass X: pass\ns.msgspec_json(X)"),
    ("pydantic", "pydantic", "import adiskq.serializers as s\ns.pydantic_json(object)"),
    ("zstd", "zstandard", "from adiskq._sansio.compression import import_zstandard\nimport_zstandard()"),
]


def run(missing: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUNNER, missing, code, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(("extra", "missing", "code"), IMPORTS, ids=[f"{e}-{m}" for e, m, _ in IMPORTS])
def test_an_import_without_its_extra_names_the_pip_install_line(extra: str, missing: str, code: str) -> None:
    """The import raises MissingExtraError (a ModuleNotFoundError) saying which extra to install."""
    probe = f"""
import adiskq
try:
{textwrap.indent(code, "    ")}
except ModuleNotFoundError as error:
    print(type(error).__name__, getattr(error, "extra", None))
    print(error)
"""
    result = run(missing, probe)
    assert result.returncode == 0, result.stderr
    kind, message = result.stdout.splitlines()[:2]
    assert kind == f"MissingExtraError {extra}"
    assert f"pip install 'adiskq[{extra}]'" in message
    assert missing in message


CLI = "from adiskq.cli import main\nmain()"


def test_serve_kafka_without_the_kafka_extra_is_a_usage_error(tmp_path: object) -> None:
    """`adiskq serve --kafka` without cramjam says to install the extra, with status 2, not "a bug"."""
    result = run("cramjam", CLI, "adiskq", "serve", str(tmp_path), "--kafka", "127.0.0.1:0")
    assert result.returncode == 2, result.stderr
    assert "pip install 'adiskq[kafka]'" in result.stderr
    assert "bug" not in result.stderr
    assert "Traceback" not in result.stderr


def test_stats_prometheus_without_its_extra_is_a_usage_error(tmp_path: object) -> None:
    """`adiskq stats --prometheus` without prometheus-client says to install the extra (status 2)."""
    stream = f"{tmp_path}/s"
    write = subprocess.run(
        [sys.executable, "-m", "adiskq", "write", stream], input="x\n", capture_output=True, text=True, timeout=60
    )
    assert write.returncode == 0, write.stderr
    result = run("prometheus_client", CLI, "adiskq", "stats", stream, "--prometheus")
    assert result.returncode == 2, result.stderr
    assert "pip install 'adiskq[prometheus]'" in result.stderr


def test_mirror_without_its_extra_is_a_usage_error(tmp_path: object) -> None:
    """`adiskq mirror` without confluent-kafka says to install the kafka-cluster extra (status 2)."""
    result = run("confluent_kafka", CLI, "adiskq", "mirror", f"{tmp_path}/s", "kafka://127.0.0.1:9092/t", "--once")
    assert result.returncode == 2, result.stderr
    assert "pip install 'adiskq[kafka-cluster]'" in result.stderr
    assert "Traceback" not in result.stderr
