"""Supervised warm-up of the policy on worked examples, stopped early once a quick pass-rate probe
reaches a target band (the RL start point: low but not zero, about 5-15 %), with an on-disk cache.

Why: RL from a random tiny model never gets a positive reward; from a model that already solves
most prompts there is nothing left to climb. The demo wants the sigmoid in between.

One warm start per model/task configuration, shared by every RL seed and every variant of a study:
it depends on model.init_seed (not the run's seed), runs on one torch thread whatever the run's
thread count, and its cache key covers everything it depends on, the code that produces it included
(its parsed code, so a comment or docstring edit keeps the key).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch

from scalerl.errors import ConfigError, InputError
from scalerl.models.forward import policy_logits, token_logprobs
from scalerl.models.policy import load_policy, save_model
from scalerl.tasks.rollout import LengthControl, SamplingSettings
from scalerl.tasks.types import Task, TaskExample
from scalerl.train.generation import left_pad
from scalerl.train.held_out import evaluate_pass_rate

RESULT_FILE = "warmstart.json"
# Thread count of the supervised phase: CPU kernels may sum in another order with more threads, and
# the warm start must not depend on the run's torch_threads (one warm start per configuration).
WARM_START_THREADS = 1
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # src/scalerl


@dataclass(frozen=True)
class WarmStartSettings:
    """Knobs of the supervised phase and of its pass-rate probe."""

    batch_size: int = 64
    learning_rate: float = 1e-3
    target_band: tuple[float, float] = (0.05, 0.15)
    probe_every: int = 25
    probe_prompts: int = 64
    probe_samples: int = 2
    max_new_tokens: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        low, high = self.target_band
        if not 0 <= low <= high <= 1:
            raise ConfigError(f"target_band must satisfy 0 <= low <= high <= 1, got {self.target_band}")
        for name in ("batch_size", "probe_every", "probe_prompts", "probe_samples", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"warm-start {name} must be >= 1, got {getattr(self, name)}")
        if not self.learning_rate > 0:
            raise ConfigError(f"warm-start learning_rate must be > 0, got {self.learning_rate}")


@dataclass(frozen=True)
class WarmStartResult:
    """What the warm-up did: steps run, the probe's (step, pass_rate) history, whether it stopped
    inside the band, and the last supervised loss (nats per completion token)."""

    steps_run: int
    probe_history: tuple[tuple[int, float], ...] = field(default_factory=tuple)
    reached_band: bool = False
    final_loss: float = float("nan")

    @property
    def pass_rate(self) -> float:
        """The last probed pass rate (nan if never probed)."""
        return self.probe_history[-1][1] if self.probe_history else float("nan")


def demonstration_ids(tokenizer: Any, example: TaskExample) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids + EOS) of a worked example (the bare answer if none is given)."""
    target = example.demonstration if example.demonstration is not None else example.answer
    prompt_ids = list(tokenizer(example.prompt)["input_ids"])
    completion_ids = list(tokenizer(target, add_special_tokens=False)["input_ids"])
    return prompt_ids, completion_ids + [tokenizer.eos_token_id]


def supervised_loss(model: torch.nn.Module, tokenizer: Any, examples: list[TaskExample]) -> torch.Tensor:
    """Mean negative log-likelihood of the demonstration tokens given the prompt:
    L = -(1 / sum_i |y_i|) sum_i sum_t log pi(y_i,t | x_i, y_i,<t) (prompt tokens not scored)."""
    pairs = [demonstration_ids(tokenizer, example) for example in examples]
    input_ids, attention_mask = left_pad([p + c for p, c in pairs], tokenizer.pad_token_id)
    device = next(model.parameters()).device
    input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
    completion_mask = torch.zeros_like(attention_mask)
    for row, (_, completion) in enumerate(pairs):
        completion_mask[row, -len(completion) :] = 1
    logits = policy_logits(model, input_ids, attention_mask)
    logprobs = token_logprobs(logits[:, :-1], input_ids[:, 1:])
    target_mask = completion_mask[:, 1:].float()
    return -(logprobs * target_mask).sum() / target_mask.sum()


def _probe(model, tokenizer, task: Task, settings: WarmStartSettings) -> float:
    examples = task.validation or task.train
    return evaluate_pass_rate(
        model,
        tokenizer,
        task,
        examples[: settings.probe_prompts],
        settings.probe_samples,
        sampling=SamplingSettings(max_new_tokens=settings.max_new_tokens),
        length_control=LengthControl(mode="truncate"),
        torch_generator=torch.Generator().manual_seed(settings.seed + 1),
    )


def warm_start(
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    steps: int,
    settings: WarmStartSettings = WarmStartSettings(),
) -> WarmStartResult:
    """Train `model` in place for up to `steps` AdamW steps on the task's worked training examples;
    every `probe_every` steps probe the validation pass rate (temperature 1) and stop as soon as it
    reaches target_band[0]. Deterministic under settings.seed."""
    if steps < 0:
        raise ConfigError(f"warm-start steps must be >= 0, got {steps}")
    if not task.train:
        raise InputError(f"task {task.name!r} has no training examples to warm up on")
    if any(example.demonstration is None and example.answer is None for example in task.train):
        raise InputError(
            f"task {task.name!r} has rows with neither an answer nor a completion to warm up on: "
            "set model.warmstart_steps=0"
        )
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    history: list[tuple[int, float]] = []
    loss_value = float("nan")
    steps_run = 0
    model.train()
    for step in range(1, steps + 1):
        steps_run = step
        rows = torch.randint(len(task.train), (settings.batch_size,), generator=generator).tolist()
        loss = supervised_loss(model, tokenizer, [task.train[row] for row in rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = float(loss.detach())
        if step % settings.probe_every == 0 or step == steps:
            history.append((step, _probe(model, tokenizer, task, settings)))
            if history[-1][1] >= settings.target_band[0]:
                break
    reached = bool(history) and settings.target_band[0] <= history[-1][1] <= settings.target_band[1]
    return WarmStartResult(steps_run, tuple(history), reached, loss_value)


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over the state dict: each tensor's name, then its values as float32 bytes (name order)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def _module_file(module: str) -> Path | None:
    """The source file of a `scalerl.*` module (package: its __init__.py); None if not one."""
    if module != "scalerl" and not module.startswith("scalerl."):
        return None
    candidate = PACKAGE_ROOT.joinpath(*module.split(".")[1:])
    if candidate.with_suffix(".py").is_file():
        return candidate.with_suffix(".py")
    return candidate / "__init__.py" if (candidate / "__init__.py").is_file() else None


def _imported_modules(path: Path) -> set[str]:
    """`scalerl.*` modules a file imports (anywhere in it), with their parent packages."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    scalerl_names = {name for name in names if name == "scalerl" or name.startswith("scalerl.")}
    return {".".join(name.split(".")[:end]) for name in scalerl_names for end in range(1, name.count(".") + 2)}


def behaviour_dump(source: str) -> str:
    """`ast.dump` of Python source without its docstrings (module, class and function): comments,
    docstrings, blank lines, line breaks and line numbers drop out, so two sources give the same
    dump exactly when they parse to the same code. The dump's format follows the Python version."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:]
    return ast.dump(tree)


@cache
def warm_start_code_digest(*modules: str) -> str:
    """sha256 over the code of `modules` (default: this one) and every scalerl module they import,
    transitively: each file's path relative to the package and its `behaviour_dump`, in path order.
    A code edit to what produces a warm start (the model, the tokenizer, the task, generation, this
    file) gives a new key; a comment or docstring edit does not. Packages on the way are covered by
    their __init__.py, without following its re-exports. Names outside scalerl are skipped."""
    seen: dict[str, Path] = {}
    pending = list(modules or ("scalerl.train.warmstart",))
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = path
        if path.name != "__init__.py":  # a package's re-exports are not what the warm start runs
            pending.extend(_imported_modules(path) - set(seen))
    digest = hashlib.sha256()
    for path in sorted(set(seen.values())):
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(behaviour_dump(path.read_text()).encode())
    return digest.hexdigest()


def warm_start_cache_key(model: torch.nn.Module, task: Task, steps: int, settings: WarmStartSettings) -> str:
    """A digest of everything the warm-started weights depend on: initial weights (so the model's
    shape, dtype and init seed), task prompts and demonstrations, steps and settings, the device
    type, the torch version and the code that runs it: this module's and the task class's module's
    (`warm_start_code_digest`; the probe scores completions with the task's reward)."""
    task_digest = hashlib.sha256(
        json.dumps([(e.prompt, e.answer, e.demonstration) for e in task.train + task.validation]).encode()
    ).hexdigest()
    parameter = next(model.parameters())
    description = json.dumps(
        {
            "weights": weights_digest(model),
            "task": task_digest,
            "steps": steps,
            "settings": asdict(settings),
            "dtype": str(parameter.dtype),
            "device": parameter.device.type,
            "torch": torch.__version__,
            "code": warm_start_code_digest("scalerl.train.warmstart", type(task).__module__),
        },
        sort_keys=True,
    )
    return hashlib.sha256(description.encode()).hexdigest()[:20]


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with `count` intra-op threads, then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def warm_start_cached(
    cache_dir: str | os.PathLike,
    model: torch.nn.Module,
    tokenizer: Any,
    task: Task,
    steps: int,
    settings: WarmStartSettings = WarmStartSettings(),
) -> tuple[torch.nn.Module, object, WarmStartResult]:
    """`warm_start`, or its saved result: (model, tokenizer, result) from `cache_dir/<key>` if a
    previous call with the same initial weights, task, steps and settings saved one there."""
    entry = Path(cache_dir) / warm_start_cache_key(model, task, steps, settings)
    if (entry / RESULT_FILE).is_file():
        cached_model, cached_tokenizer = load_policy(entry, dtype=model.dtype)
        return cached_model.to(next(model.parameters()).device), cached_tokenizer, _read_result(entry)
    with torch_threads(WARM_START_THREADS):
        result = warm_start(model, tokenizer, task, steps, settings)
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    try:
        save_model(model, tokenizer, staging / "model")
        for item in (staging / "model").iterdir():
            os.replace(item, staging / item.name)
        (staging / RESULT_FILE).write_text(json.dumps(asdict(result)))
        if not entry.exists():
            os.replace(staging, entry)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return model, tokenizer, result


def _read_result(entry: Path) -> WarmStartResult:
    raw = json.loads((entry / RESULT_FILE).read_text())
    history = tuple((int(step), float(rate)) for step, rate in raw["probe_history"])
    return WarmStartResult(int(raw["steps_run"]), history, bool(raw["reached_band"]), float(raw["final_loss"]))
