"""The count as unsloth hands it to zoo: the hand-off slice of unsloth's generated GRPO ``compute_loss``.

unsloth writes its GRPOTrainer from source: each function in
``unsloth.models.rl_replacements.RL_FUNCTIONS["grpo_trainer"]`` rewrites a
TRL method's source, and ``compute_loss`` comes out as unsloth's own body,
which reads ``num_items_in_batch`` from the batch and passes it to zoo's loss
(``grpo_accumulated_loss`` / ``UnslothEfficientGRPO`` -> ``grpo_compute_loss``)
as a keyword. A guard on the unsloth side sits on that path.

This module builds that source the way unsloth does (TRL's
``GRPOTrainer.compute_loss`` through every rewrite), finds the read, keeps
the statements after it that touch the count (and the imports among them)
up to the first call that hands the count on, and the expression that call
passes. Executed with a batch of our own (``inputs``) and a stand-in
``self`` (the trainer's ``args``, ``accelerator.num_processes``), it gives
the count that reaches zoo. ``plain`` means unsloth hands the count on as
read; anything else is a guard (or some other change) to judge. Runs after
``import unsloth``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

COUNT = "num_items_in_batch"


@dataclass
class HandOff:
    found: bool
    reason: str
    statements: list[str] = field(default_factory=list)  # the slice after the read, as source
    passes: list[str] = field(default_factory=list)  # the expressions the zoo calls receive, distinct
    code: Any = None
    exprs: list[Any] = field(default_factory=list)

    @property
    def plain(self) -> bool:
        """The count reaches zoo as read: nothing after the read touches it, and every call passes the bare name."""
        return self.found and not self.statements and all(p == COUNT for p in self.passes)

    def record(self) -> dict[str, Any]:
        return {"found": self.found, "reason": self.reason, "statements": self.statements, "passes": self.passes,
                "plain": self.plain}


class _Args(SimpleNamespace):
    def __getattr__(self, name: str) -> Any:  # a trainer argument the probe does not set: None, like an unset one
        return None


def generated_source() -> str:
    """``compute_loss`` as unsloth writes it into its GRPOTrainer (TRL's source through unsloth's rewrites)."""
    from trl.trainer.grpo_trainer import GRPOTrainer
    from unsloth.models.rl_replacements import RL_FUNCTIONS

    source = inspect.getsource(GRPOTrainer.compute_loss)
    for rewrite in RL_FUNCTIONS.get("grpo_trainer", []):
        source = rewrite("compute_loss", source)
    return textwrap.dedent(source)


def _mentions(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == COUNT for n in ast.walk(node))


def _is_read(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == COUNT for t in stmt.targets)
            and any(isinstance(n, ast.Name) and n.id == "inputs" for n in ast.walk(stmt.value)))


def _handing_calls(stmt: ast.stmt) -> list[ast.expr]:
    return [k.value for n in ast.walk(stmt) if isinstance(n, ast.Call) for k in n.keywords if k.arg == COUNT]


def read(source: str) -> HandOff:
    """The hand-off slice of ``source`` (a ``compute_loss`` function); ``found`` False when it has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return HandOff(False, f"the generated compute_loss does not parse: {exc.msg}")
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "compute_loss"), None)
    if fn is None:
        return HandOff(False, "no compute_loss in the generated source")
    body = fn.body
    start = next((i for i, s in enumerate(body) if _is_read(s)), None)
    if start is None:
        return HandOff(False, f"compute_loss never reads {COUNT} from its inputs at the top level of its body")
    kept: list[ast.stmt] = [body[start]]
    passes: list[ast.expr] = []
    for stmt in body[start + 1:]:
        calls = _handing_calls(stmt)
        if calls:
            passes = calls
            break
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or _mentions(stmt):
            kept.append(stmt)
    if not passes:
        return HandOff(False, f"no call after the read hands {COUNT} on")
    distinct = {ast.dump(p): p for p in passes}
    module = ast.Module(body=kept, type_ignores=[])
    return HandOff(True, f"read at line {body[start].lineno} of the generated compute_loss",
                   statements=[ast.unparse(s) for s in kept[1:]], passes=[ast.unparse(p) for p in distinct.values()],
                   code=compile(module, "<unsloth compute_loss hand-off>", "exec"),
                   exprs=[compile(ast.Expression(body=p), "<hand-off argument>", "eval") for p in distinct.values()])


def handed(h: HandOff, count: Any, loss_type: str, batch: Any = None, num_processes: int = 1,
           max_completion_length: int | None = None) -> list[Any]:
    """The count each zoo call receives when the batch carries ``count`` (one value per distinct argument)."""
    import math

    import torch

    args = _Args(loss_type=loss_type, mask_truncated_completions=True, beta=0.0,
                 max_completion_length=max_completion_length, steps_per_generation=1,
                 gradient_accumulation_steps=1, per_device_train_batch_size=None)
    trainer = SimpleNamespace(args=args, accelerator=SimpleNamespace(num_processes=num_processes), loss_type=loss_type,
                              beta=0.0, current_gradient_accumulation_steps=1, mask_truncated_completions=True,
                              model=SimpleNamespace(training=True))
    inputs: dict[str, Any] = {COUNT: count}
    if batch is not None:
        inputs.update(completion_mask=batch.mask, completion_ids=batch.input_ids, advantages=batch.advantages)
    ns: dict[str, Any] = {"self": trainer, "inputs": inputs, "torch": torch, "math": math}
    exec(h.code, ns)
    return [eval(e, ns) for e in h.exprs]
