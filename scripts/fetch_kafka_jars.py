"""Fetch the Java jars the Kafka tests run — Apache Kafka's broker and the Java clients — into .cache/kafka/.

Usage:
    python scripts/fetch_kafka_jars.py              fetch every pinned set (scripts/test runs it; seconds once cached)
    python scripts/fetch_kafka_jars.py --pin SET GROUP:ARTIFACT:VERSION...
                                                    print the manifest lines for a new set: the
                                                    artifacts named and everything they need at run
                                                    time, as Maven resolves them, with their SHA-256

The manifest, tests/kafka/jars.txt, pins each set of jars by Maven coordinate and SHA-256, one jar a
line: `SET GROUP:ARTIFACT:VERSION[:CLASSIFIER] SHA256`. A set is one class path; its jars land in
.cache/kafka/SET/ as ARTIFACT-VERSION[-CLASSIFIER].jar. A jar already cached with its hash is kept.
The others are downloaded by Maven from Maven Central (one run per set), each by its exact coordinate and with nothing
transitive (the manifest lists the whole class path, so a dependency cannot change under it), into
Maven's own download cache (~/.m2/repository), then checked and written in place atomically. Exits 1,
saying what could not be had, when Maven fails or a hash differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

CHECKOUT = Path(__file__).resolve().parent.parent
MANIFEST = CHECKOUT / "tests" / "kafka" / "jars.txt"
CACHE = CHECKOUT / ".cache" / "kafka"
# Maven 3.8's own default for this plugin (2.8) predates the options used here; pinned, as a jar is.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class Jar:
    """One pinned jar: the set (class path) it belongs to, its Maven coordinate and SHA-256."""

    set: str
    coordinate: str
    sha256: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        """(group, artifact, version, classifier or '')."""
        group, artifact, version, *classifier = self.coordinate.split(":")
        return group, artifact, version, classifier[0] if classifier else ""

    @property
    def file_name(self) -> str:
        """The name Maven gives the jar, and the cache keeps: ARTIFACT-VERSION[-CLASSIFIER].jar."""
        _, artifact, version, classifier = self.parts
        return f"{artifact}-{version}{'-' + classifier if classifier else ''}.jar"

    @property
    def repository_place(self) -> Path:
        """Where the jar lies in Maven's repository layout: GROUP/../ARTIFACT/VERSION/FILE."""
        group, artifact, version, _ = self.parts
        return Path(*group.split("."), artifact, version, self.file_name)

    @property
    def path(self) -> Path:
        """Where the jar is cached."""
        return CACHE / self.set / self.file_name


def pinned(manifest: Path = MANIFEST) -> list[Jar]:
    """Every jar of the manifest."""
    jars = []
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            fields = line.split()
            if len(fields) != 3 or len(fields[1].split(":")) not in (3, 4):
                raise ValueError(f"{manifest}:{number}: expected `SET GROUP:ARTIFACT:VERSION[:CLASSIFIER] SHA256`")
            jars.append(Jar(*fields))
    return jars


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached(jar: Jar) -> bool:
    """Whether the jar is in the cache with its pinned hash."""
    return jar.path.is_file() and sha256_of(jar.path) == jar.sha256


def pom(coordinates: list[str], transitive: bool) -> str:
    """A POM whose dependencies are ``coordinates`` (each alone, or with what it needs at run time)."""
    dependencies = []
    for coordinate in coordinates:
        group, artifact, version, *classifier = coordinate.split(":")
        lines = [f"<groupId>{escape(group)}</groupId>", f"<artifactId>{escape(artifact)}</artifactId>"]
        lines.append(f"<version>{escape(version)}</version>")
        if classifier:
            lines.append(f"<classifier>{escape(classifier[0])}</classifier>")
        if not transitive:
            lines.append(
                "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
            )
        dependencies.append("<dependency>" + "".join(lines) + "</dependency>")
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>adiskq.tests</groupId><artifactId>kafka-jars</artifactId><version>0</version>"
        "<packaging>pom</packaging><dependencies>" + "".join(dependencies) + "</dependencies></project>"
    )


def maven_copy(coordinates: list[str], into: Path, transitive: bool) -> None:
    """Have Maven download ``coordinates`` and copy their jars into ``into`` (raises on failure)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven is not installed: apt-get install maven (scripts/test does)")
    with tempfile.TemporaryDirectory() as project:
        (Path(project) / "pom.xml").write_text(pom(coordinates, transitive))
        goal = f"{DEPENDENCY_PLUGIN}:copy-dependencies"
        # In Maven's repository layout (GROUP/ARTIFACT/VERSION/FILE), so every jar's coordinate is known.
        options = [f"-DoutputDirectory={into}", "-DincludeScope=runtime", "-Dmdep.useRepositoryLayout=true"]
        done = subprocess.run(
            [mvn, "-B", "-q", "-f", str(Path(project) / "pom.xml"), goal, *options],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mvn exited {done.returncode}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}")


def fetch(jars: list[Jar]) -> list[str]:
    """Download ``jars`` (one set, one Maven run) into the cache; the problems found, if any."""
    problems = []
    with tempfile.TemporaryDirectory() as folder:
        downloaded = Path(folder)
        try:
            maven_copy(sorted({jar.coordinate for jar in jars}), downloaded, transitive=False)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            return [f"Maven could not download the jars: {error}"]
        for jar in jars:
            source = downloaded / jar.repository_place
            if not source.is_file():
                problems.append(f"Maven did not deliver {jar.coordinate} ({jar.file_name})")
            elif (found := sha256_of(source)) != jar.sha256:
                problems.append(f"{jar.coordinate} from Maven has SHA-256 {found}, not the pinned {jar.sha256}")
            else:
                jar.path.parent.mkdir(parents=True, exist_ok=True)
                partial = jar.path.with_name(jar.path.name + ".partial")
                shutil.copyfile(source, partial)
                os.replace(partial, jar.path)
    return problems


def pin(set_name: str, coordinates: list[str]) -> int:
    """Print the manifest lines of ``set_name``: ``coordinates`` and their run-time dependencies."""
    with tempfile.TemporaryDirectory() as folder:
        maven_copy(coordinates, Path(folder), transitive=True)
        for jar in sorted(Path(folder).rglob("*.jar")):
            print(f"{set_name}  {coordinate_of(jar.relative_to(folder))}  {sha256_of(jar)}")
    return 0


def coordinate_of(place: Path) -> str:
    """The Maven coordinate of a jar at ``place`` in a repository layout: GROUP/../ARTIFACT/VERSION/FILE."""
    *group, artifact, version, name = place.parts
    classifier = name[len(f"{artifact}-{version}") : -len(".jar")].lstrip("-")
    return f"{'.'.join(group)}:{artifact}:{version}" + (f":{classifier}" if classifier else "")


def main(argv: list[str] | None = None) -> int:
    """Fetch what is missing (0 when every pinned jar is cached with its hash), or print a new set."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pin", nargs="+", metavar="ARG", help="SET then the GROUP:ARTIFACT:VERSION to resolve")
    arguments = parser.parse_args(argv)
    if arguments.pin:
        if len(arguments.pin) < 2:
            parser.error("--pin takes a set name and at least one GROUP:ARTIFACT:VERSION")
        return pin(arguments.pin[0], arguments.pin[1:])
    missing = [jar for jar in pinned() if not cached(jar)]
    problems = []
    # One Maven run per set: within one POM Maven keeps a single version of each artifact.
    for set_name in sorted({jar.set for jar in missing}):
        jars = [jar for jar in missing if jar.set == set_name]
        print(f"== fetching {len(jars)} jars of {set_name} through Maven")
        problems += fetch(jars)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
