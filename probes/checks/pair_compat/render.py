"""The drill-down of this check's payloads: the missing zoo names, the import's exception chain and the trainer
classes generated after it. Stdlib only."""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import DetailTable, StepDetails, as_dict, step_payload

# This check runs no training; the name only meets the renderer contract (no training table shows it).
TRAIN_COUNT = "pair_compat_no_training_count"


def details(section: dict[str, Any]) -> StepDetails:
    st = as_dict(section.get("static"))
    rows = tuple((str(m.get("name")), str(m.get("breaks")), ", ".join(m.get("features") or []),
                  "; ".join(f"{w.get('file')}:{w.get('line')}" for w in (m.get("where") or [])[:3]),
                  str(m.get("closest")))
                 for m in (as_dict(x) for x in st.get("missing") or []))
    run = step_payload(section, "runtime")
    chain = tuple((str(e.get("link")), str(e.get("type")), str(e.get("message"))[:300])
                  for e in (as_dict(x) for x in run.get("chain") or []))
    gen = [as_dict(x) for x in step_payload(section, "trainers").get("trainers") or []]
    made = ", ".join(f"{r.get('trainer')} {r.get('state')}" for r in gen) or "did not run"
    items = (("pair", f"{st.get('pair', '-')}: {st.get('reason', '')}"),
             ("import unsloth", f"{run.get('class', '-')}: {run.get('reason', 'did not run')}"),
             ("trainer classes", made))
    tables = []
    if rows:
        tables.append(DetailTable("missing zoo names", ("name", "breaks", "features", "unsloth side", "zoo side"),
                                  rows, code=frozenset({0})))
    if chain:
        tables.append(DetailTable("import unsloth: exception chain", ("link", "type", "message"), chain))
    if gen:
        tables.append(DetailTable("trainer classes unsloth generates from zoo source",
                                  ("trainer", "class", "state", "feature", "seconds", "reason"),
                                  tuple((str(r.get("trainer")), str(r.get("class")), str(r.get("state")),
                                         str(r.get("feature")), str(r.get("seconds", "-")),
                                         str(r.get("reason"))[:300]) for r in gen), code=frozenset({1}),
                                  bad=frozenset((i, 2) for i, r in enumerate(gen)
                                                if r.get("state") in ("skew", "error"))))
    return StepDetails(items, tuple(tables))
