"""Release gating: ``nox -s gate -- --unsloth SOURCE``.

For one candidate unsloth build (a version, a path to a checkout or wheel, or
``git+URL@REF``) the gate derives the zoo builds a user could end up with:

* the lowest zoo release the candidate's requirements admit (a plain install);
* the newest zoo release;
* the N releases just below that floor (``--below``, default 3), which a
  pinned environment or a lockfile would reach with an override;
* any zoo backports named with ``--backport NAME@BASEVERSION``.

Each pair is crossed with two trainer stacks (``[[stack]]``, ``matrix.spec.stacks``):
the floor and the newest transformers/TRL the candidate admits, derived with
``uv pip compile`` (as usual, and ``--resolution lowest-direct``), never
hard-coded. One stack when both coincide; none, said in the generated file and
the log, when the candidate's requirements cannot be resolved.

Zoo releases and their static verdicts come from the scan (``matrix.scan``,
warm in well under a second), so yanked releases are never candidates. The
gate writes a generated matrix file, runs it through the pipeline like any
other matrix (``matrix.cells.pipeline.run_matrix``, in this process), and exits 0
(all pass), 1 (``missing``/``broken``), or 2 (``error``, or the harness
failed) -- see ``matrix.errors``.

Why in this process and not a nested ``nox -s matrix``: nox would only add a
second process that loads the noxfile again and parses the generated matrix
once more, and the gate would then have to hand it the run (output directory,
strictness, a fresh run id) through environment variables and read its
verdict back from ``report.json``. In-process the gate builds a run value of
its own (``matrix.cells.runs.Run``) and gets the report as a value. Cells then run
one after the other, as ``nox -s matrix`` without ``-j`` did.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from matrix import errors
from matrix.cells.runs import Run
from matrix.envs.tools import run_tool, uv_bin
from matrix.errors import SkewmatrixError
from matrix.spec import CellOptions, stacks
from matrix.spec.inputs import CONTROL_RE
from matrix.spec.stacks import Stack

GIT_RE = re.compile(r"^git\+(?P<url>.+)@(?P<ref>[^@/]+)$")


class GateError(SkewmatrixError):
    """The gate's input cannot be used."""


def candidate_build(source: str, workdir: Path, flag: str = "--unsloth") -> tuple[dict[str, str], str | None]:
    """The matrix entry for the candidate (given with ``flag``), and its core metadata when readable now."""
    m = GIT_RE.match(source)
    if m:
        return {"source": "git", "url": m.group("url"), "ref": m.group("ref")}, None
    path = Path(source)
    if path.exists():
        target = workdir / "candidate" / path.name
        shutil.rmtree(workdir / "candidate", ignore_errors=True)
        target.parent.mkdir(parents=True)
        # Matrix paths are confined to the matrix file's directory: bring the candidate inside it.
        if path.is_dir():
            shutil.copytree(path, target, ignore=shutil.ignore_patterns(".git", ".nox", "__pycache__"))
        else:
            shutil.copy2(path, target)
        return {"source": "path", "path": f"candidate/{path.name}"}, wheel_metadata(target) if path.is_file() else None
    try:
        Version(source)
    except InvalidVersion:
        raise GateError(f"{flag} {source!r}: not a version, an existing path, or git+URL@REF") from None
    return {"source": "pypi", "version": source}, None


def wheel_metadata(wheel: Path) -> str | None:
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
            return zf.read(name).decode("utf-8", "replace") if name else None
    except (OSError, zipfile.BadZipFile):
        return None


def pick_zoo(zoo: list[dict[str, Any]], plain_spec: str | None, below: int) -> list[tuple[str, str]]:
    """(version, why) for each zoo candidate, oldest first, without duplicates."""
    from matrix.scan import admitted_floor

    usable = sorted((z for z in zoo if not z["yanked"] and z["verdict"] != "absent"),
                    key=lambda z: Version(z["version"]))
    if not usable:
        raise GateError("the scan found no zoo release that carries the scanned check's kernel")
    picks: dict[str, str] = {}
    floor = admitted_floor(plain_spec, usable, include_yanked=False) if plain_spec is not None else None
    if floor is not None:
        picks[floor["version"]] = "admitted floor"
        lower = [z["version"] for z in usable if Version(z["version"]) < Version(floor["version"])]
        for v in lower[-below:] if below else []:
            picks.setdefault(v, "below the floor (reachable by a pin)")
    picks.setdefault(usable[-1]["version"], "newest")
    return sorted(picks.items(), key=lambda kv: Version(kv[0]))


def candidate_requirement(candidate: dict[str, str], workdir: Path) -> str:
    """The candidate as one requirement line uv can resolve."""
    if candidate["source"] == "pypi":
        return f"unsloth=={candidate['version']}"
    if candidate["source"] == "git":
        return f"unsloth @ git+{candidate['url']}@{candidate['ref']}"
    return f"unsloth @ {(workdir / candidate['path']).resolve().as_uri()}"


def trainer_stacks(candidate: dict[str, str], workdir: Path, log: Callable[[str], Any] = print,
                   runner: stacks.Runner | None = None) -> tuple[list[Stack], str]:
    """The floor and newest transformers/TRL stacks the candidate admits, and how they were found (or why not)."""
    found: tuple[list[Stack], str]
    try:
        uv = "uv" if runner else uv_bin()
    except SkewmatrixError as exc:
        found = ([], f"no trainer stacks: {exc}")
    else:
        run = runner or (lambda argv: run_tool(argv, timeout=600))
        found = stacks.admitted(candidate_requirement(candidate, workdir), CellOptions().python,
                                workdir / "stacks", run, uv=uv)
    log(f"gate: {found[1]}")
    return found


def matrix_text(candidate: dict[str, str], zoo: list[tuple[str, str]], backports: list[tuple[str, str]],
                trainer: list[Stack] | None = None, note: str = "") -> str:
    def table(fields: dict[str, str], kind: str = "build") -> str:
        return f"[[{kind}]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()) + "\n"

    text = "# Generated by `nox -s gate`: the candidate against the zoo builds users can reach.\n"
    text += "".join(f"# {CONTROL_RE.sub('', line)}\n" for line in note.splitlines())  # TOML comments: no controls
    text += "schema = 1\n\n"
    for s in trainer or []:
        text += table({"name": s.name, **s.as_dict}, kind="stack")
    text += table({"name": "candidate", "package": "unsloth", **candidate})
    for version, why in zoo:
        text += f"# {why}\n" + table({"name": f"z{version}", "package": "unsloth_zoo", "source": "pypi",
                                      "version": version})
    for name, base in backports:
        if f"z{base}" not in {f"z{v}" for v, _ in zoo}:
            text += table({"name": f"z{base}", "package": "unsloth_zoo", "source": "pypi", "version": base})
        text += table({"name": f"{name}-{base}", "package": "unsloth_zoo", "source": "backport",
                       "base": f"z{base}", "backport": name})
    return text


def structural_verdict(candidate: dict[str, str], workdir: Path, log: Callable[[str], Any] = print) -> bool:
    """True when the candidate is structurally ``incompatible`` with a zoo release a plain install can pick: a
    release judged from its wheel on the index, a path or git candidate from its own tree (or wheel file)."""
    from matrix.scan.history import structural_gate
    from matrix.scan.history.candidate_tree import candidate_path, structural_tree_gate

    if candidate["source"] == "pypi":
        return structural_gate(candidate["version"], log)
    path = candidate_path(candidate, workdir, log)
    return path is not None and structural_tree_gate(path, log)


def run(args: argparse.Namespace, outer: Run, log: Callable[[str], Any] = print) -> int:
    """The gate for parsed arguments (``matrix.cli.arguments.add_gate_arguments``), writing under ``outer``'s
    output directory; exit 0/1/2 (``matrix.errors``)."""
    from matrix import scan
    from matrix.cells import pipeline
    from reports.gate import evaluate, recommendation

    if not 0 <= args.below <= 50:
        raise GateError(f"--below {args.below}: must be between 0 and 50")
    backports = []
    for item in args.backport:
        name, sep, base = item.partition("@")
        if not sep or not name or not base:
            raise GateError(f"--backport {item!r}: expected NAME@BASEVERSION, e.g. zoo-fix@2026.9.3")
        backports.append((name, base))
    out = outer.out / "gate"
    out.mkdir(parents=True, exist_ok=True)
    candidate, metadata = candidate_build(args.unsloth, out)
    structural_fails = structural_verdict(candidate, out, log)  # first: no env is built for it
    log("gate: reading zoo releases and the candidate's requirements (scan)")
    opts = scan.ScanOptions(unsloth=f"=={candidate['version']}" if candidate["source"] == "pypi" else "",
                            skip_unsloth=candidate["source"] != "pypi")
    doc = scan.run(opts, log=lambda _: None)
    scan.write(doc, out)
    if candidate["source"] == "pypi":
        row = next((u for u in doc["unsloth"] if u["version"] == candidate["version"]), None)
        if row is None:
            raise GateError(f"--unsloth {args.unsloth}: no such unsloth release on the index")
        plain = row["zoo_requirement"].get("plain")
    else:
        plain = scan.zoo_requirements(metadata).get("plain") if metadata else None
        if plain is None:
            rec = scan.recommended_zoo(doc)
            log("gate: the candidate's zoo requirement is unknown before building it; using newest and the "
                f"{args.below} releases below fixed_since ({rec.words() if rec else 'none found'})")
            plain = f">={rec.version}" if rec else None
    zoo = pick_zoo(doc["zoo"], plain, args.below)
    for v, why in zoo:
        log(f"gate: zoo {v}: {why}")
    trainer, note = trainer_stacks(candidate, out, log)
    matrix = out / "gate.toml"
    matrix.write_text(matrix_text(candidate, zoo, backports, trainer, note), encoding="utf-8")
    # The gate's own run: its generated matrix, its output directory, the caller's strictness and run id.
    gate_run = Run(matrix_path=matrix, out=out, strict=outer.strict, run_id=outer.run_id)
    pipeline.run_matrix(gate_run, log=log)
    report = pipeline.report(gate_run, log=log)
    rec = scan.recommended_zoo(doc)  # fixed_since, never first_fixed: no vulnerable release after it
    since, how = (rec.version, rec.confirmed_by) if rec else (None, None)
    for cell in report["cells"]:
        log(f"- {cell['cell_id']}:\n  {recommendation(cell, report['checks'], since, how, doc.get('check'))}")
    outcome = evaluate(report)
    for line in outcome.lines():
        log(f"gate: {line}")
    code = errors.gate_code(outcome)
    if code == errors.EXIT_OK and structural_fails:
        code = errors.EXIT_GATE
    log(f"gate: exit {code} ({errors.gate_words(code)})")
    return code
