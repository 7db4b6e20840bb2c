"""Release gating of a candidate zoo: ``nox -s gate -- --zoo SOURCE``.

A zoo release meets every published unsloth whose requirement admits it in a plain install, so the gate
looks at the candidate (a version, a wheel, a checkout path, or ``git+URL@REF``) from three sides, each beside
the previous zoo release (``--previous``; by default the published release of the candidate's own version
for a wheel, tree or git candidate, else the newest release below it):

1. structural: every unsloth release of the window (12 months, ``--all`` every release, ``--against SPEC``)
   whose zoo requirement admits the candidate, judged against the candidate by the registry's pair reader
   (``matrix.scan.history.zoo_candidate``). A pair that worked with the previous release and is
   ``incompatible`` with the candidate is a regression: the gate fails, naming the releases and the names;
2. hazards: each check's static detector on the candidate's files against the previous release's scan
   verdict; a fix the candidate reverts (``fixed`` -> ``vulnerable``) fails;
3. cells: the newest ``--cells N`` (default 2) admitting unsloth releases x the candidate, real cells on CPU
   through the generated matrix and the pipeline, as the unsloth gate runs them.

Progress goes to stderr; stdout opens with the verdict, the regressions and the reverted fixes (what a zoo
maintainer needs, in its first lines), then the details; ``gate/zoo-gate.json`` holds everything. Exit 0/1/2
(``matrix.errors``): a regression or a reverted fix read from the source is a finding (1) whatever the cells
say; a pair or check that could not be judged, or a cell that could not look, is no verdict (2).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from matrix import errors
from matrix.cells.runs import Run
from matrix.cli.release_gate import GateError, candidate_build
from matrix.scan.history import readers, zoo_candidate

HEAD_GROUPS = 4  # regression lines in the opening block (the rest in the details)
WORDS = {errors.EXIT_OK: "PASS", errors.EXIT_GATE: "FAIL", errors.EXIT_HARNESS: "NO VERDICT"}


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def materialize(source: str, out: Path) -> tuple[dict[str, str], Path]:
    """The candidate's matrix entry and the wheel or tree to read (a release is downloaded, sha256 checked)."""
    from matrix.errors import BuildError
    from matrix.scan.history.candidate_tree import candidate_path
    from matrix.sources.backport import download_wheel, wheel_cache

    _, t = readers.pair_target()
    build, _ = candidate_build(source, out, flag="--zoo")
    if build["source"] == "pypi":
        try:
            return build, download_wheel(t.referred, build["version"], wheel_cache())
        except BuildError as exc:
            raise GateError(f"--zoo {source}: {exc}") from None
    path = candidate_path(build, out, progress, package=t.referred)
    if path is None:
        raise GateError(f"--zoo {source}: cannot check out {build.get('url')}@{build.get('ref')}")
    return build, path


def spans(versions: list[str], judged: list[str]) -> str:
    """``versions`` as runs of consecutive releases of ``judged``: ``2026.10.1 … 2026.10.9 (9), 2026.8.2``."""
    order = {v: i for i, v in enumerate(judged)}
    runs: list[list[str]] = []
    for v in sorted(versions, key=lambda x: order[x]):
        if runs and order[runs[-1][-1]] + 1 == order[v]:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]} … {r[-1]} ({len(r)})" for r in runs)


def names_of(entry: dict[str, Any], where: bool = True) -> str:
    """What breaks a pair: its missing names, each with how it breaks (and, with ``where``, the first place in
    unsloth that uses it and the exception Python would raise)."""
    parts = []
    for m in entry["breaks"][:4]:
        at = m.get("where") or {}
        place = f", {at.get('file')}:{at.get('line')}" if where and at.get("file") else ""
        detail = f": {m['detail']}" if where and m.get("detail") else ""
        how = "model load fails" if m.get("breaks") == "model-load" else "import unsloth fails"
        parts.append(f"`{m['name']}` ({how}{place}){detail}")
    more = len(entry["breaks"]) - 4
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "") if parts else (entry["reason"] or "-")


def regression_groups(admitted: list[dict[str, Any]]) -> list[tuple[list[str], str]]:
    """Regressions grouped by the names that break them: ``[(unsloth versions, names)]``, the largest first."""
    groups: dict[str, list[str]] = {}
    for e in admitted:
        if e["regression"]:
            groups.setdefault(names_of(e, where=False), []).append(e["unsloth"])
    return sorted(((v, k) for k, v in groups.items()), key=lambda g: -len(g[0]))


def matrix_text(build: dict[str, str], unsloth: list[str]) -> str:
    def table(fields: dict[str, str]) -> str:
        return "[[build]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()) + "\n"

    text = "# Generated by `nox -s gate -- --zoo`: the newest unsloth releases that admit the candidate zoo.\n"
    text += "schema = 1\n\n"
    text += "".join(table({"name": f"u{v}", "package": "unsloth", "source": "pypi", "version": v}) for v in unsloth)
    return text + table({"name": "candidate", "package": "unsloth_zoo", **build})


def run_cells(build: dict[str, str], unsloth: list[str], out: Path, outer: Run) -> dict[str, Any]:
    """Real cells of ``unsloth`` x the candidate: ``{ids, code, lines, headline}``."""
    from matrix.cells import pipeline
    from reports.gate import evaluate

    matrix = out / "gate.toml"
    matrix.write_text(matrix_text(build, unsloth), encoding="utf-8")
    gate_run = Run(matrix_path=matrix, out=out, strict=outer.strict, run_id=outer.run_id)
    pipeline.run_matrix(gate_run, log=progress)
    report = pipeline.report(gate_run, log=progress)
    outcome = evaluate(report)
    return {"ids": [c["cell_id"] for c in report["cells"]], "code": errors.gate_code(outcome),
            "lines": outcome.lines(), "headline": outcome.headline()}


def decide(structural: dict[str, Any], haz: list[dict[str, Any]], cells: dict[str, Any] | None, label: str,
           previous: str | None) -> tuple[int, list[str]]:
    """The exit code and the opening lines: the verdict, the regressions, the reverted fixes, what is unknown."""
    admitted = structural["admitted"]
    groups = regression_groups(admitted)
    reverted = [h for h in haz if h.get("reverted")]
    unresolved = [e for e in admitted if e["unresolved"]] + [h for h in haz if h.get("unresolved")]
    cells_code = cells["code"] if cells else errors.EXIT_OK
    if groups or reverted or cells_code == errors.EXIT_GATE:
        code = errors.EXIT_GATE
    elif unresolved or cells_code == errors.EXIT_HARNESS:
        code = errors.EXIT_HARNESS
    else:
        code = errors.EXIT_OK
    lines = [f"gate --zoo: {WORDS[code]}: {label}"]
    judged = [e["unsloth"] for e in admitted]
    for versions, names in groups[:HEAD_GROUPS]:
        lines.append(f"regression: unsloth {spans(versions, judged)}: worked with zoo {previous or '-'}, "
                     f"incompatible with the candidate: missing {names}")
    if len(groups) > HEAD_GROUPS:
        lines.append(f"regression: {len(groups) - HEAD_GROUPS} more group(s) of unsloth releases (details below)")
    lines += [f"reverted fix: {h['check']}: zoo {previous} is fixed, the candidate vulnerable: {h['reason']}"
              for h in reverted]
    if unresolved:
        lines.append(f"no verdict: {len(unresolved)} pair(s) or check(s) could not be judged (details below)")
    counts: dict[str, int] = {}
    for e in admitted:
        counts[e["candidate"]] = counts.get(e["candidate"], 0) + 1
    lines.append(f"structural: {len(admitted)} of {structural['judged']} unsloth release(s) admit the candidate: "
                 + (", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "none")
                 + f"; {sum(len(v) for v, _ in groups)} regression(s)")
    lines.append("hazards: " + "; ".join(
        f"{h['check']} n/a" if "na" in h else f"{h['check']} {h['previous'] or 'n/a'} -> {h['candidate']}"
        for h in haz))
    lines.append(f"cells: {cells['headline']}" if cells else "cells: none (--cells 0)")
    lines.append(f"gate: exit {code} ({WORDS[code].lower()})")
    return code, lines


def details(structural: dict[str, Any], haz: list[dict[str, Any]], cells: dict[str, Any] | None) -> list[str]:
    """Every admitted unsloth release beside the previous zoo, every check, every cell line."""
    out = ["", "unsloth release: candidate (previous zoo)"]
    for e in structural["admitted"]:
        flag = " REGRESSION" if e["regression"] else " NO VERDICT" if e["unresolved"] else ""
        if e["candidate"] == "degraded" and e["previous"] == "compatible":
            flag = " LOSES FEATURES"
        tail = f": missing {names_of(e)}" if e["breaks"] else f": missing {', '.join(e['lost'])}" if e.get(
            "lost") else f": {e['reason']}" if e["reason"] else ""
        out.append(f"  unsloth {e['unsloth']}: {e['candidate']} ({e['previous'] or 'n/a'}){flag}{tail}")
    out.append("checks: candidate (previous zoo)")
    for h in haz:
        if "na" in h:
            out.append(f"  {h['check']}: {h['na']}")
        else:
            flag = " REVERTED" if h["reverted"] else " NO VERDICT" if h["unresolved"] else ""
            out.append(f"  {h['check']}: {h['candidate']} ({h['previous'] or 'n/a'}){flag}: {h['reason']}")
    if cells:
        out += ["cells: " + ", ".join(cells["ids"]), *(f"  {line}" for line in cells["lines"])]
    return out


def run(args: argparse.Namespace, outer: Run, log: Callable[[str], Any] = print) -> int:
    """The zoo gate for parsed arguments (``matrix.cli.arguments.add_gate_arguments``); exit 0/1/2."""
    if args.backport:
        raise GateError("--backport belongs to --unsloth; a zoo backport is gated as its wheel: --zoo PATH.whl")
    if not 0 <= args.cells <= 10:
        raise GateError(f"--cells {args.cells}: must be between 0 and 10")
    try:
        SpecifierSet(args.against)
    except InvalidSpecifier as exc:
        raise GateError(f"--against {args.against!r}: not a PEP 440 specifier set (e.g. '>=2026.10'): {exc}") from None
    out = outer.out / "gate"
    out.mkdir(parents=True, exist_ok=True)
    build, path = materialize(args.zoo, out)
    sources, _, version = zoo_candidate.read_zoo_candidate(path)
    check_id, t = readers.pair_target()
    if not sources:
        raise GateError(f"--zoo {args.zoo}: no {t.referred} package in {path}")
    versions = zoo_candidate.zoo_versions()
    if build["source"] == "pypi" and build["version"] not in versions:
        raise GateError(f"--zoo {args.zoo}: no such {t.referred} release on the index (or it is yanked)")
    if args.previous and args.previous not in versions:
        raise GateError(f"--previous {args.previous}: no such {t.referred} release on the index (or it is yanked)")
    previous = args.previous or zoo_candidate.previous_release(versions, version, build["source"] != "pypi")
    label = (f"{t.referred} {version or '(version unknown)'} ({build['source']} {path.name}) beside zoo "
             f"{previous or 'none (no earlier release)'}")
    progress(f"gate: {label}")
    from matrix.scan.history.candidate_tree import zoo_rows

    prev_row = zoo_rows(f"=={previous}", log=lambda _m: None)[0][0] if previous else None
    rows = zoo_candidate.unsloth_rows(args.against, args.everything, progress)
    structural = zoo_candidate.judge_structural(rows, t.definitions(sources), version, prev_row)
    progress(f"gate: structural ({check_id}): {len(structural['admitted'])} of {len(rows)} unsloth release(s) "
             "admit the candidate")
    haz = zoo_candidate.hazards(sources, previous)
    newest = sorted((e["unsloth"] for e in structural["admitted"]), key=Version)[-args.cells:] if args.cells else []
    cells = run_cells(build, newest, out, outer) if newest else None
    code, head = decide(structural, haz, cells, label, previous)
    for line in head + details(structural, haz, cells):
        log(line)
    doc = {"candidate": {"source": args.zoo, "build": build, "version": version}, "previous": previous,
           "check": check_id, "structural": structural, "hazards": haz, "cells": cells, "exit": code,
           "summary": head}
    (out / "zoo-gate.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return code
