"""Every install line of the README, tried as a user would: each in a fresh venv, then its example.

The README's install lines name the base package and its extras (``pip install "adiskq[otel]"
opentelemetry-sdk``, ``pip install -e '.[examples]'``). For each, this builds a fresh venv, installs
adiskq's wheel (built once from the checkout) with that extra alone and the packages the line adds,
and runs what the README says the extra is for — its README example where it has one, else a smoke
test of the part — from an empty folder, so nothing of the checkout is imported. An extra that lacks
what its example needs, or an import of a package no extra declares, fails here rather than for a
user. An extra the README names that has no check below fails too: add one.

The checks run two at a time (a CI machine has two cores, and most of the time goes to pip
unpacking wheels from its cache). Prints each line's time and the total.

    python scripts/fresh_installs.py [EXTRA ...]      # every line, or only these ('' for the base)
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
# `pip install adiskq`, `pip install "adiskq[otel]" opentelemetry-sdk`, `pip install -e '.[bench]'`
INSTALL_LINE = re.compile(
    r"""pip install (?:-e )?["']?(?:adiskq|\.)(?:\[(?P<extra>[a-z-]+)\])?["']?(?P<more>(?: [a-z][\w.-]*)*)"""
)
MENTIONED_EXTRA = re.compile(r"""["'`]adiskq\[(?P<extra>[a-z-]+)\]["'`]""")


class Line(NamedTuple):
    """One way to install: an extra (None: the base package) and the packages the line adds."""

    extra: str | None
    more: tuple[str, ...]


def install_lines(readme: str) -> list[Line]:
    """Each distinct install line of the README, and each extra it names in passing."""
    found: dict[str | None, tuple[str, ...]] = {}
    for match in INSTALL_LINE.finditer(readme):
        extra = match["extra"]
        more = tuple(match["more"].split())
        found[extra] = tuple(sorted({*found.get(extra, ()), *more}))
    for match in MENTIONED_EXTRA.finditer(readme):
        found.setdefault(match["extra"], ())
    return [Line(extra, more) for extra, more in sorted(found.items(), key=lambda item: item[0] or "")]


def readme_program(readme: str, containing: str) -> str:
    """The README's complete program (a Python block ending in ``anyio.run(main)``) that contains ``containing``."""
    for block in re.findall(r"```python\n(.*?)```", readme, re.DOTALL):
        if "anyio.run(main" in block and containing in block:
            return str(block)
    raise SystemExit(f"the README has no complete program containing {containing!r}")


class Venv:
    """A fresh venv in ``folder`` (pip is run from this interpreter, not installed into it)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.work = os.path.join(folder, "work")  # an empty folder to run in: nothing of the checkout on sys.path
        os.makedirs(self.work)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(folder, "venv")], check=True)
        self.bin = os.path.join(folder, "venv", "bin")
        self.python = os.path.join(self.bin, "python")

    def install(self, wheelhouse: str, *requirements: str) -> None:
        """Install from the wheelhouse only: what the line's extra declares, and nothing else."""
        pip = [sys.executable, "-m", "pip", "--python", self.python, "install", "--quiet"]
        subprocess.run(
            [*pip, "--disable-pip-version-check", "--no-index", "--find-links", wheelhouse, *requirements], check=True
        )

    def run(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a command with the venv first on PATH, in the empty folder; fails on a non-zero status."""
        environment = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": self.folder}
        environment.pop("PYTHONPATH", None)
        environment.update(env or {})
        result = subprocess.run(
            list(args), cwd=self.work, env=environment, input=stdin, capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result

    def program(self, code: str, *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
        """Run a Python program with the venv's interpreter; its output."""
        path = os.path.join(self.work, "program.py")
        with open(path, "w") as file:
            file.write(code)
        return self.run(self.python, path, env=env, timeout=timeout).stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- what each install line is for ----------------------------------------------------------------


def check_base(venv: Venv, readme: str) -> None:
    """The quick start runs; an optional part used without its extra names the extra (status 2)."""
    venv.program(readme_program(readme, ""))  # the quick start: the first complete program
    venv.run("adiskq", "--help")
    serve = subprocess.run(
        [os.path.join(venv.bin, "adiskq"), "serve", venv.work, "--kafka", "127.0.0.1:0"],
        cwd=venv.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if serve.returncode != 2 or "pip install 'adiskq[kafka]'" not in serve.stderr:
        raise AssertionError(f"adiskq serve --kafka without the extra: status {serve.returncode}, {serve.stderr!r}")


def check_trio(venv: Venv, readme: str) -> None:
    """The quick start on Trio."""
    program = readme_program(readme, "").replace("anyio.run(main)", 'anyio.run(main, backend="trio")')
    venv.program(program)


def check_spark(venv: Venv, readme: str) -> None:
    """A stream written and read back through the Spark data source (a local session)."""
    venv.program(
        textwrap.dedent(
            """
            import os, sys
            import anyio, adiskq, adiskq.spark
            from pyspark.sql import SparkSession

            os.environ["PYSPARK_PYTHON"] = sys.executable  # as the README says

            async def main():
                async with adiskq.Producer("events") as producer:
                    await producer.push_many([adiskq.Record(b"v%d" % i) for i in range(10)])

            anyio.run(main)
            spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
            adiskq.spark.register(spark)
            rows = spark.read.format("adiskq").load("events").collect()
            assert sorted(r.value for r in rows) == sorted(b"v%d" % i for i in range(10)), rows
            spark.stop()
            """
        ),
        timeout=600,
    )


def check_serializers(extra: str) -> Callable[[Venv, str], None]:
    def check(venv: Venv, readme: str) -> None:
        """A typed value pushed and read back through the extra's serializer."""
        model = (
            "import msgspec\nclass Order(msgspec.Struct):\n    id: int\nserde = adiskq.serializers.msgspec_json(Order)"
            if extra == "msgspec"
            else "import pydantic\nclass Order(pydantic.BaseModel):\n    id: int\n"
            "serde = adiskq.serializers.pydantic_json(Order)"
        )
        venv.program(
            f"import anyio, adiskq, adiskq.serializers\n{model}\n"
            + textwrap.dedent(
                """
                async def main():
                    async with adiskq.Producer("orders", value_serializer=serde.serializer) as producer:
                        await producer.push(Order(id=1))
                    async with adiskq.Consumer("orders", end="close", value_deserializer=serde.deserializer) as c:
                        assert [m.value async for m in c] == [Order(id=1)]

                anyio.run(main)
                """
            )
        )

    return check


def check_zstd(venv: Venv, readme: str) -> None:
    """A compressed stream on the pure-Python core: its dictionary trained, its values read back."""
    venv.program(
        textwrap.dedent(
            """
            import json, anyio, adiskq

            async def main():
                values = [json.dumps({"id": i, "kind": "click", "page": "/docs"}).encode() for i in range(3000)]
                async with adiskq.Producer("events", compression="zstd") as producer:
                    await producer.push_many([adiskq.Record(v) for v in values])
                async with adiskq.Consumer("events", end="close") as consumer:
                    assert [m.value async for m in consumer] == values

            anyio.run(main)
            """
        ),
        env={"ADISKQ_NO_EXTENSIONS": "1"},
    )


def check_otel(venv: Venv, readme: str) -> None:
    """The README's metrics and traces example."""
    venv.program(readme_program(readme, "opentelemetry.sdk"))


def check_prometheus(venv: Venv, readme: str) -> None:
    """`adiskq stats --prometheus` of a stream."""
    venv.run("adiskq", "write", "orders", stdin="a\nb\n")
    output = venv.run("adiskq", "stats", "orders", "--prometheus").stdout
    if "adiskq_partition_next_offset" not in output:
        raise AssertionError(f"no offsets in the exposition:\n{output}")


def serving(venv: Venv, root: str) -> tuple[subprocess.Popen[str], str]:
    """`adiskq serve ROOT --kafka` started in ``venv``, and its address once it listens."""
    port = free_port()
    server = subprocess.Popen(
        [os.path.join(venv.bin, "adiskq"), "serve", root, "--kafka", f"127.0.0.1:{port}"],
        cwd=venv.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    # It logs a line when it listens; a start that reads its topics for transactions left open (no
    # transaction state yet) says so first.
    lines = []
    while line := server.stdout.readline():
        lines.append(line)
        if f"listening on 127.0.0.1:{port}" in line:
            return server, f"127.0.0.1:{port}"
    server.terminate()
    raise AssertionError(f"the gateway did not start: {''.join(lines)}")


def check_kafka(venv: Venv, readme: str) -> None:
    """The README's gateway session: `adiskq serve --kafka`, then kcat produces and consumes."""
    root = os.path.join(venv.work, "streams")
    os.makedirs(root)
    server, broker = serving(venv, root)
    try:
        venv.run("kcat", "-b", broker, "-P", "-t", "orders", "-K:", stdin='customer-00:{"id": 1}\n', timeout=60)
        out = venv.run("kcat", "-b", broker, "-C", "-t", "orders", "-e", "-f", "%o %k %s\\n", timeout=60).stdout
        if out.strip() != '0 customer-00 {"id": 1}':
            raise AssertionError(f"kcat read back {out!r}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def check_kafka_cluster(venv: Venv, readme: str) -> None:
    """`adiskq mirror kafka://.../TOPIC STREAM --once` copies a topic into a stream, and the example
    service runs on a kafka:// URL. The topics are served by adiskq's own gateway (the extra brings
    what it needs), as no Kafka cluster is at hand here."""
    root = os.path.join(venv.work, "streams")
    os.makedirs(root)
    venv.run("adiskq", "write", os.path.join(root, "orders"), stdin="a\nb\nc\n")
    server, broker = serving(venv, root)
    try:
        venv.run("adiskq", "mirror", f"kafka://{broker}/orders", "copy", "--once", timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=30)
    out = venv.run("adiskq", "read", "copy", "--format", "value").stdout
    if out != "a\nb\nc\n":
        raise AssertionError(f"the mirrored stream holds {out!r}")
    # The API on a kafka:// URL, with the same gateway as the cluster: README's example service.
    server, broker = serving(venv, root)
    try:
        example = os.path.join(ROOT, "examples", "orders_service.py")
        said = venv.run(venv.python, example, "--where", f"kafka://{broker}/billing", "--orders", "50", timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=30)
    if "billed 49 orders" not in said.stdout:
        raise AssertionError(f"examples/orders_service.py on kafka:// said {said.stdout!r}")


def check_examples(venv: Venv, readme: str) -> None:
    """The Trio service example (the FastAPI ones are driven by the suite's examples tests)."""
    venv.run(venv.python, os.path.join(ROOT, "examples", "trio_service.py"), "--stream", "orders", "--orders", "100")
    venv.program("import fastapi, uvicorn, httpx")  # what the FastAPI example and its README command import


def check_bench(venv: Venv, readme: str) -> None:
    """What bench_compare.py imports of its peers."""
    venv.program("import redis, persistqueue, litequeue, matplotlib")


CHECKS: dict[str | None, Callable[[Venv, str], None]] = {
    None: check_base,
    "trio": check_trio,
    "spark": check_spark,
    "msgspec": check_serializers("msgspec"),
    "pydantic": check_serializers("pydantic"),
    "zstd": check_zstd,
    "otel": check_otel,
    "prometheus": check_prometheus,
    "kafka": check_kafka,
    "kafka-cluster": check_kafka_cluster,
    "examples": check_examples,
    "bench": check_bench,
}


def try_line(line: Line, wheelhouse: str, readme: str, scratch: str) -> float:
    """Install ``line`` in a fresh venv and run its check; the seconds it took."""
    started = time.monotonic()
    venv = Venv(tempfile.mkdtemp(prefix=f"{line.extra or 'base'}-", dir=scratch))
    venv.install(wheelhouse, f"adiskq[{line.extra}]" if line.extra else "adiskq", *line.more)
    CHECKS[line.extra](venv, readme)
    return time.monotonic() - started


def main() -> int:
    with open(README) as file:
        readme = file.read()
    lines = install_lines(readme)
    unchecked = [line.extra for line in lines if line.extra not in CHECKS]
    if unchecked:
        print(f"the README installs extras that nothing here checks: {unchecked}; add a check for each")
        return 1
    wanted = sys.argv[1:]
    if wanted:
        known = [line.extra or "" for line in lines]
        unknown = [extra for extra in wanted if extra not in known]
        if unknown:
            print(f"no README install line has the extras {unknown}; choose among {known} ('' is plain adiskq)")
            return 2
        lines = [line for line in lines if (line.extra or "") in wanted]
    started = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="adiskq-installs-")
    failures = []
    try:
        # adiskq's wheel (its C core compiled once), then every wheel the lines need, in one
        # resolution (from pip's cache): each venv then installs offline, from these alone.
        wheelhouse = os.path.join(scratch, "wheels")
        pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "-w", wheelhouse]
        subprocess.run([*pip_wheel, "--no-deps", ROOT], check=True)
        [wheel] = [os.path.join(wheelhouse, name) for name in os.listdir(wheelhouse) if name.endswith(".whl")]
        print(f"built {os.path.basename(wheel)} in {time.monotonic() - started:.1f} s", flush=True)
        extras = ",".join(line.extra for line in lines if line.extra)
        subprocess.run([*pip_wheel, f"{wheel}[{extras}]", *{more for line in lines for more in line.more}], check=True)
        print(f"gathered the wheels of every line in {time.monotonic() - started:.1f} s", flush=True)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = {pool.submit(try_line, line, wheelhouse, readme, scratch): line for line in lines}
            for future in concurrent.futures.as_completed(futures):
                line = futures[future]
                name = " ".join([f"adiskq[{line.extra}]" if line.extra else "adiskq", *line.more])
                try:
                    print(f"ok    pip install {name}: {future.result():.1f} s", flush=True)
                except Exception as error:  # every line is tried; each failure is reported
                    failures.append(name)
                    print(f"FAIL  pip install {name}: {error}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(lines)} install lines in {time.monotonic() - started:.1f} s; {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
