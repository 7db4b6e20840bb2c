"""The pairings a mutation run's survivors run again on (``nox -s mutation``, driven by ``matrix.mutation``).

Every mutant runs on the target's vulnerable pairing. One that survives
there may still differ from the guard where zoo differs: where zoo carries
the fix (the guard must stay out) or where zoo NaNs for one count form only
(the guard must answer that form and leave the other to zoo). So the
survivors, and the mutants the equivalence list calls ``unreachable`` (they
differ only where the vulnerable pairing cannot go), run again on each
survivor zoo in turn, each pass on what the ones before left; a mutant a
pass kills is killed, its ``killed_by`` naming the test and the zoo.

A survivor zoo is a release on the index (``"2026.10.9"``) or a backport
folder relative to the repository root, applied to the vulnerable zoo or to
the release after an ``@`` (``"tests/backports/zoo-fix-none-only"``,
``"<folder>@2026.9.3"``). Either is built by the source a matrix cell would
use (``matrix.sources``: ``PypiSource``, ``BackportSource`` rebuilding the
wheel) and installed next to the target's unsloth with uv overrides
(a ``matrix.envs.recipe.Recipe``, as a cell's), one env per zoo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.envs import envrun, recipe
from matrix.errors import MutationError, SkewmatrixError
from matrix.settings import REPO_ROOT
from matrix.sources import BackportSource, BuildSource, PypiSource
from matrix.sources.backport_build import MANIFEST
from matrix.spec.tables import suggest

ZOO = "unsloth_zoo"
INSTALL_TIMEOUT_S = 1800
# Where a backport folder is looked for when a spec names none that exists: the shipped and the test ones.
BACKPORT_FOLDERS = ("matrix/backports", "tests/backports")


@dataclass(frozen=True)
class ZooPairing:
    """One zoo a pass runs on: ``spec`` as the target or ``--survivor-zoo`` spells it, the source that builds
    it, and ``label``, what ``killed_by`` and the report call it (the release, or ``<backport> on <release>``)."""

    spec: str
    source: BuildSource
    label: str

    @property
    def slug(self) -> str:
        """The label as a folder name (the pass's env and runner output under ``--out``)."""
        return re.sub(r"[^A-Za-z0-9.]+", "-", self.label).strip("-")


def known_backports(root: Path = REPO_ROOT) -> list[str]:
    """Every backport folder under ``BACKPORT_FOLDERS``, relative to ``root`` (for suggestions)."""
    return sorted(p.parent.relative_to(root).as_posix() for d in BACKPORT_FOLDERS
                  for p in (root / d).glob(f"*/{MANIFEST}"))


def parse_pairing(spec: str, vulnerable_zoo: str, root: Path = REPO_ROOT, what: str = "survivor zoo",
                  ) -> ZooPairing | str:
    """The pairing ``spec`` names, or the problem with it (one line, starting with ``what`` and the spec)."""
    where = f"{what} {spec!r}"
    folder, _, version = spec.partition("@")
    if (root / folder / MANIFEST).is_file():
        base = PypiSource(package=ZOO, base_dir=root, version=version or vulnerable_zoo)
        backport = BackportSource(package=ZOO, base_dir=root, base=f"{ZOO} {base.version}", backport=folder,
                                  base_source=base)
        problems = base.problems(where) + backport.problems(where)
        label = f"{Path(folder).name} on {base.version}"
        return "; ".join(problems) if problems else ZooPairing(spec, backport, label)
    release = PypiSource(package=ZOO, base_dir=root, version=spec)
    if "@" not in spec and "/" not in spec and not release.problems(where):
        return ZooPairing(spec, release, spec)
    folders = known_backports(root)
    return (f"{where}: neither a release (a PEP 440 version, e.g. '2026.10.9') nor a backport folder holding "
            f"{MANIFEST} relative to {root}, optionally @RELEASE (default: the vulnerable zoo, {vulnerable_zoo}); "
            f"backport folders: {folders or 'none'}{suggest(folder, folders)}")


def parse_pairings(zoo: str, specs: list[str] | tuple[str, ...], envs: list[str] | None = None,
                   ) -> tuple[ZooPairing, list[ZooPairing], dict[str, Path]]:
    """The vulnerable zoo's pairing, the survivor zoos' and the existing envs given for some of them
    (``ZOO=DIR``, from ``--survivor-env``); every problem at once."""
    problems: list[str] = []
    vulnerable = parse_pairing(zoo, zoo, what="--zoo")
    if isinstance(vulnerable, str):
        problems.append(vulnerable)
    pairings: list[ZooPairing] = []
    for spec in specs:
        got = parse_pairing(spec, zoo)
        if isinstance(got, str):
            problems.append(got)
        elif any(p.spec == spec for p in pairings):
            problems.append(f"survivor zoo {spec!r} given twice")
        else:
            pairings.append(got)
    given: dict[str, Path] = {}
    for item in envs or []:
        spec, eq, directory = item.partition("=")
        if not eq or not spec or not directory:
            problems.append(f"--survivor-env {item!r}: expected ZOO=DIR, ZOO one of the survivor zoos {list(specs)}")
        elif spec not in specs:
            problems.append(f"--survivor-env {item!r}: {spec!r} is not a survivor zoo of this run; survivor zoos: "
                            f"{list(specs)}{suggest(spec, specs)}")
        elif not (Path(directory) / "bin" / "python").exists():
            problems.append(f"--survivor-env {item!r}: no bin/python in {directory}")
        else:
            given[spec] = Path(directory)
    if problems or isinstance(vulnerable, str):
        raise MutationError(f"{len(problems)} problem(s) with the zoos of the run:\n"
                            + "\n".join(f"  - {p}" for p in problems))
    return vulnerable, pairings, given


def build_env(env_dir: Path, unsloth: str, zoo: BuildSource, python: str = "3.11") -> Path:
    """A cell env for unsloth ``unsloth`` x ``zoo``: the zoo materialised as a cell's build is (a backport
    rebuilt as a wheel), both installed with uv overrides as a cell installs them; reused when it already holds
    them (uv installs nothing then)."""
    py = envrun.ensure_env(env_dir, python)
    try:
        made = zoo.materialize(env_dir / "skewmatrix-build")
    except (SkewmatrixError, OSError) as exc:  # OSError: e.g. no index while downloading a base wheel
        raise MutationError(f"zoo {zoo.describe()}: {exc}") from None
    unsloth_pin = f"unsloth=={unsloth}"
    how = recipe.Recipe(python=python, requirements=(unsloth_pin, made.requirement), overrides=(unsloth_pin, made.pin))
    res = recipe.apply(how, py, env_dir / "skewmatrix-build", INSTALL_TIMEOUT_S)
    if not res.ok:
        raise MutationError(f"uv pip install unsloth=={unsloth} with zoo {zoo.describe()} failed "
                            f"(exit {res.returncode}):\n{res.tail()}")
    return py


def again(mutants: list[dict[str, Any]], equivalent: set[str]) -> list[str]:
    """The ids a survivor pass runs: every survivor but those listed ``equivalent`` (they behave like the guard
    on every zoo); an ``unreachable`` one runs, since it may die where this zoo goes."""
    return [m["id"] for m in mutants if m["status"] == "survived" and m["id"] not in equivalent]


def merge_pass(doc: dict[str, Any], other: dict[str, Any], label: str) -> list[str]:
    """Fold a survivor pass into the run: a survivor killed there is killed (``killed_by`` names the zoo).
    Returns the ids it killed."""
    there = {m["id"]: m for m in other.get("mutants", [])}
    killed = []
    for m in doc["mutants"]:
        found = there.get(m["id"])
        if m["status"] == "survived" and found is not None and found["status"] != "survived":
            m["status"] = found["status"]
            m["killed_by"] = f"{found['killed_by'] or found['status']} (zoo {label})"
            m["reason"] = found.get("reason", "")
            killed.append(m["id"])
    return killed
