"""``mutation.md``: a mutation score as Markdown. A pure function of the score and the run's meta.

The score line and the bar first, then the strict score (the ``unreachable``
entries counted as survivors), the run's guard, env and size, its passes
(the vulnerable pairing, then each survivor zoo: what each ran and which
mutants it killed), which tests killed how many mutants, the survivors, the
equivalent or unreachable ones with their arguments, and any stale entry of
the equivalence list.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def render(score: dict[str, Any], meta: dict[str, Any]) -> str:
    """The whole ``mutation.md`` from a score (``matrix.mutation.Score`` as a dict, with ``passed``) and the
    run's meta."""
    result = SimpleNamespace(**score)
    pct = "n/a" if result.score is None else f"{result.score:.1%}"
    verdict = "meets" if result.passed else "below"
    lines = [
        "# Mutation score",
        "",
        f"**{pct}** of non-equivalent mutants killed ({result.killed}/{result.ran - result.equivalent}); "
        f"bar {result.bar:.0%}: {verdict}.",
        "",
        f"Counting the {sum(1 for e in result.equivalents if e['kind'] == 'unreachable')} `unreachable` mutants "
        f"as survivors: {'n/a' if result.strict_score is None else f'{result.strict_score:.1%}'}.",
        "",
        f"- guard: `{meta.get('guard_file')}` loaded as `{meta.get('guard_module')}`",
        f"- env: unsloth {meta.get('unsloth')} x unsloth_zoo {meta.get('zoo')} (`{meta.get('env')}`)",
        _survivor_line(meta),
        f"- mutants: {result.generated} generated, {result.ran} run"
        + (f" (sample of {meta['sample']})" if meta.get("sample") else "")
        + f", {result.equivalent} equivalent",
        f"- run time: {meta.get('seconds', 0):.0f} s",
        "",
        *_passes(meta.get("passes") or []),
        "## Killed by",
        "",
        "| test | mutants |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in result.killed_by.items()),
        "",
        f"## Survivors ({len(result.survivors)})",
        "",
    ]
    lines += ["| id | line | before | after |", "|---|---|---|---|", *(
        f"| `{s['id']}` | {s['line']} | `{_cell(s['before'])}` | `{_cell(s['after'])}` |" for s in result.survivors)
              ] if result.survivors else ["none"]
    lines += ["", f"## Equivalent or unreachable ({len(result.equivalents)})", "", "| id | kind | after | why |",
              "|---|---|---|---|", *(f"| `{e['id']}` | {e['kind']} | `{_cell(e['after'])}` | {e['why']} |"
                                     for e in result.equivalents)]
    if result.stale_equivalents:
        lines += ["", "## Stale equivalence entries", "",
                  *(f"- `{i}` (not generated any more, or killed)" for i in result.stale_equivalents)]
    return "\n".join(lines) + "\n"


def _survivor_line(meta: dict[str, Any]) -> str:
    passes = meta.get("passes") or []
    if len(passes) > 1:
        return "- survivors run again on unsloth_zoo " + ", then ".join(p["zoo"] for p in passes[1:])
    if meta.get("fixed_zoo"):  # a mutation.json written before the survivor passes were a list
        return f"- survivors run again with unsloth_zoo {meta['fixed_zoo']} (`{meta.get('fixed_env')}`)"
    return "- no survivor pass"


def _passes(passes: list[dict[str, Any]]) -> list[str]:
    """One row per pass: the first ran every mutant (its kills counted), each later one what was left (its kills
    named)."""
    if not passes:
        return []
    rows = []
    for i, p in enumerate(passes, 1):
        killed = p.get("killed") or []
        named = str(len(killed)) if i == 1 else ", ".join(f"`{k}`" for k in killed) or "none"
        env = f"`{p['env']}`" if p.get("env") else "not built (nothing left to run)"
        rows.append(f"| {i} | {p.get('zoo')} ({p.get('source')}) | {env} | {p.get('ran')} | {named} |")
    return ["## Passes", "", "| pass | unsloth_zoo | env | mutants run | killed |", "|---|---|---|---|---|",
            *rows, ""]


def _cell(text: Any) -> str:
    return str(text).replace("\n", " ").replace("|", "\\|").replace("`", "'")[:100]
