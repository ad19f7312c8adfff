"""The licences of the Python and Java dependencies (``make audit``).

``python audit/licenses.py`` lists every distribution installed in the project's virtual
environment with its licence (the package's licence expression, else its licence field,
else its trove classifiers), and every Maven artifact the Java face resolves (``mvn
dependency:list``) with the licences its POM (or a parent POM) declares. An unknown licence
is printed as such; the listing is for review, nothing is refused here.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
M2 = Path.home() / ".m2" / "repository"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def python_licence(d: importlib.metadata.Distribution) -> str:
    meta = d.metadata
    expr = str(meta["License-Expression"] or "")
    if expr:
        return expr
    field = str(meta["License"] or "").strip()
    if field and len(field) < 60 and "\n" not in field:
        return field
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
    return ", ".join(classifiers) or "unknown (see the package)"


def python_rows() -> list[tuple[str, str, str]]:
    rows = {}
    for d in importlib.metadata.distributions():
        name = d.metadata["Name"]
        if name and name.lower() != "stampede":
            rows[name.lower()] = (name, d.version, python_licence(d))
    return sorted(rows.values(), key=lambda r: r[0].lower())


def pom_licences(group: str, artifact: str, version: str, depth: int = 0) -> str:
    pom = M2 / Path(*group.split(".")) / artifact / version / f"{artifact}-{version}.pom"
    if not pom.exists() or depth > 4:
        return "unknown (no POM in the local repository)"
    root = ET.parse(pom).getroot()
    names = [n.text.strip() for n in root.findall("m:licenses/m:license/m:name", NS) if n.text]
    if names:
        return ", ".join(names)
    parent = root.find("m:parent", NS)
    if parent is None:
        return "unknown (the POM declares none)"

    def text(tag: str) -> str:
        node = parent.find(f"m:{tag}", NS)
        return node.text.strip() if node is not None and node.text else ""

    return pom_licences(text("groupId"), text("artifactId"), text("version"), depth + 1)


def java_rows() -> list[tuple[str, str, str]]:
    out = ROOT / "target" / "java-dependencies.txt"
    out.parent.mkdir(exist_ok=True)
    done = subprocess.run(
        ["mvn", "-q", "-f", str(ROOT / "java" / "stampede" / "pom.xml"), "dependency:list",
         "-DincludeScope=test", f"-DoutputFile={out}", "-DappendOutput=true"],
        capture_output=True, text=True,
    )
    if done.returncode != 0 or not out.exists():
        print(f"mvn dependency:list failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
        return []
    seen = {}
    for line in out.read_text().splitlines():
        m = re.match(r"\s+([\w.\-]+):([\w.\-]+):jar:([\w.\-]+):(\w+)", line)
        if m and not m.group(1).startswith("dev.stampede"):
            g, a, v, scope = m.groups()
            seen[(g, a)] = (f"{g}:{a} ({scope})", v, pom_licences(g, a, v))
    out.unlink()
    return sorted(seen.values())


def table(title: str, rows: list[tuple[str, str, str]]) -> None:
    print(f"\n{title}: {len(rows)}")
    width = max((len(r[0]) for r in rows), default=10)
    for name, version, licence in rows:
        print(f"  {name:{width}}  {version:14}  {licence}")


def main() -> None:
    table("Python distributions in .venv", python_rows())
    table("Java artifacts (the Java face; its examples add none)", java_rows())


if __name__ == "__main__":
    main()
