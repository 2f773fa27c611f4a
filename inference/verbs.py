"""`toolsweep VERB ...`: one command for everything toolsweep does.

A bare `toolsweep key=value ...` (or `toolsweep run key=value ...`) runs an evaluation through
Hydra; each other verb is one entry point with its own `--help` and one error style
(`toolsweep VERB: error: ...`, exit 2). The commands of earlier releases (`toolsweep-grade`,
`toolsweep-compare`, ...) still run the same verb and say that they are aliases.

This module imports nothing heavy: a verb's module is imported when that verb runs or its parser
is built (for the command reference and the docs check).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

CONF = Path(__file__).resolve().parent.parent / "conf"
RUN = "run"


@dataclass(frozen=True)
class Verb:
    name: str
    target: str
    """`module:function`, called as function(argv, prog=...); empty for `run` (Hydra's app)."""
    parser_target: str
    """`module:function`, called as function(prog): the argparse parser the verb's main parses with
    (for `run`, Hydra's), built without importing anything heavy or doing any of the verb's work."""
    summary: str

    def entry(self) -> Callable[..., int | None]:
        """The verb's main (imported now: only the verb that runs pays for its imports)."""
        return _imported(self.target)

    def build_parser(self, prog: str) -> argparse.ArgumentParser:
        """The verb's parser, named `prog`, as its main builds it."""
        return _imported(self.parser_target)(prog)


def _imported(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


VERBS: tuple[Verb, ...] = (
    Verb(RUN, "", "inference.verbs:hydra_parser",
         "evaluate (the default verb): toolsweep [run] key=value ...; -m for a sweep"),
    Verb("grade", "inference.regrade:main", "grading.regrade:build_parser",
         "re-grade a finished run or sweep from its samples (no model)"),
    Verb("judge", "inference.rejudge:main", "inference.rejudge:build_parser",
         "re-run a run's judge from its stored agent trajectories"),
    Verb("compare", "grading.compare:main", "grading.compare:build_parser",
         "paired comparison of two runs: CIs, McNemar's test, flips"),
    Verb("agreement", "grading.agreement:main", "grading.agreement:build_parser",
         "two judges held against each other on the same episodes"),
    Verb("merge", "inference.merge:main", "inference.merge:build_parser",
         "merge a sharded run's parts into one run"),
    Verb("gold", "inference.gold:main", "inference.gold:build_parser",
         "write a benchmark's gold answers as replay predictions"),
    Verb("checkpoints", "inference.sweep:main_checkpoints", "inference.sweep:checkpoints_parser",
         "a training run's checkpoints as a sweep list"),
    Verb("export", "grading.export:main", "grading.export:build_parser",
         "write a sweep's metrics into an experiment tracker"),
    Verb("prepare-model", "inference.models:main", "inference.models:build_parser",
         "unpack the embedded model into a model folder"),
    Verb("ls", "inference.verbs:list_names", "inference.verbs:list_parser",
         "list what can be named: datasets, benchmarks, solvers, scorers, engines, launchers"),
)
ALIAS_PREFIX = "toolsweep-"


def verb_named(name: str) -> Verb | None:
    return next((verb for verb in VERBS if verb.name == name), None)


def verb_lines() -> str:
    """One line per verb, for `toolsweep --help`."""
    width = max(len(verb.name) for verb in VERBS)
    return "\n".join(f"  {verb.name:<{width}}  {verb.summary}" for verb in VERBS)


def dispatch(verb: Verb, argv: Sequence[str]) -> int | None:
    """Run `verb` (any but `run`, which is Hydra's app) with its arguments."""
    return verb.entry()(list(argv), prog=f"toolsweep {verb.name}")


def alias_main() -> None:
    """An old command (`toolsweep-grade ...`): the verb it names, after saying so on stderr."""
    name = Path(sys.argv[0]).name.removeprefix(ALIAS_PREFIX)
    verb = verb_named(name)
    if verb is None:
        print(f"toolsweep: error: {sys.argv[0]} names no verb; see toolsweep --help", file=sys.stderr)
        sys.exit(2)
    print(f"{ALIAS_PREFIX}{name} is an alias of `toolsweep {name}`, kept for one release (see the changelog)",
          file=sys.stderr)
    sys.exit(verb.entry()(sys.argv[1:], prog=f"{ALIAS_PREFIX}{name}") or 0)


def verb_parser(name: str) -> argparse.ArgumentParser:
    """The argparse parser of verb `name` as its main builds it, without running the verb (for the
    generated command reference and the docs check). `run` is Hydra's own parser."""
    verb = verb_named(name)
    if verb is None:
        raise KeyError(f"no verb {name!r}; the verbs are {[v.name for v in VERBS]}")
    return verb.build_parser(f"toolsweep {verb.name}")


def hydra_parser(prog: str = f"toolsweep {RUN}") -> argparse.ArgumentParser:
    """Hydra's own parser (the one `run` parses with), named `prog`."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.prog = prog
    for action in parser._actions:  # Hydra's lazy help texts, as argparse's formatter needs them
        action.help = None if action.help is None else str(action.help)
    return parser


def list_names(argv: Sequence[str] | None = None, prog: str = "toolsweep ls") -> int:
    """`toolsweep ls [KIND]`: every name a user can give, one line each."""
    args = list_parser(prog).parse_args(argv)
    for kind, (how, lister) in _listings().items():
        if args.kind not in (None, kind):
            continue
        print(f"{kind} ({how}):")
        rows = lister()
        width = max((len(name) for name, _ in rows), default=0)
        for name, line in rows:
            print(f"  {name:<{width}}  {line}")
    return 0


def list_parser(prog: str = "toolsweep ls") -> argparse.ArgumentParser:
    """The parser of `toolsweep ls` (naming the kinds lists nothing)."""
    parser = argparse.ArgumentParser(prog=prog, description=list_names.__doc__)
    parser.add_argument("kind", nargs="?", choices=list(_listings()), help="list only this kind")
    return parser


def _listings() -> dict[str, tuple[str, Callable[[], list[tuple[str, str]]]]]:
    return {
        "datasets": ("dataset=NAME", lambda: yaml_options(CONF / "dataset")),
        "benchmarks": ("dataset.name=NAME, or a module's dotted path", _benchmarks),
        "solvers": ("a benchmark's solvers", _solvers),
        "scorers": ("a benchmark's scorer", _scorers),
        "engines": ("engine=NAME, engine@roles.<role>.engine=NAME", lambda: yaml_options(CONF / "engine")),
        "launchers": ("hydra/launcher=NAME, with -m", lambda: yaml_options(CONF / "hydra" / "launcher")),
        "sweepers": ("hydra/sweeper=NAME, with -m", lambda: [("basic", "Hydra's: every combination"),
                                                              ("race", "a racing sweep (docs/racing.md)")]),
    }


def yaml_options(folder: Path, width: int = 100) -> list[tuple[str, str]]:
    """Each YAML option of a config group with the first sentence of its leading comment."""
    return [(path.stem, yaml_summary(path.read_text(encoding="utf-8"), width))
            for path in sorted(folder.glob("*.yaml"))]


def yaml_summary(text: str, width: int = 100) -> str:
    """The first sentence of a config YAML's leading comment (Hydra's `# @package` line skipped)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("# @package"):
            continue
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").strip())
    return first_sentence(" ".join(lines), width)


def first_sentence(text: str, width: int = 100) -> str:
    """Up to the first full stop that ends a sentence (a capital follows; not "e.g. x"), at most
    `width` characters."""
    text = " ".join(text.split())
    for end, mark in enumerate(text):
        if mark == "." and (end + 1 == len(text) or text[end + 1:end + 3].strip()[:1].isupper()):
            text = text[:end + 1]
            break
    return text if len(text) <= width else text[:width - 1].rsplit(" ", 1)[0] + "…"


def _benchmarks() -> list[tuple[str, str]]:
    from inference.benchmarks import benchmark_names

    return [(name, _module_line(f"inference.benchmarks.{name}")) for name in benchmark_names()]


def _solvers() -> list[tuple[str, str]]:
    from inference.solvers import solver_names

    return [(name, _module_line(f"inference.solvers.{name}")) for name in solver_names()]


def _scorers() -> list[tuple[str, str]]:
    from grading.scoring import scorer_names

    return [(name, _module_line(f"grading.scorers.{name}")) for name in scorer_names()]


def _module_line(module: str) -> str:
    """The first line of a module's docstring (importing it: benchmarks and scorers are light)."""
    doc = (importlib.import_module(module).__doc__ or "").strip()
    return first_sentence(doc.split("\n\n")[0])
