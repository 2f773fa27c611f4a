"""The docs check: every `toolsweep ...` command line and every override the README and the docs
pages show (in code blocks and in inline code) must still work against this checkout.

- each verb exists (inference/verbs.py) and each `--flag` is one its parser has;
- each override (`key=value`, `group=option`, `+key=value`, `++key=value`, `group@pkg=option`)
  composes with Hydra against conf/, the composed config types (the benchmark's and the
  engine's own options classes), and its values are ones a run accepts (the run's own
  `inference.config.value_problems`: `dataset.history=swapp` is refused with the accepted values),
  as a run would check before any model loads. A sweep's values (`-m key=a,b`, `range(N)`) are
  composed one by one.

A command is composed as written. An override shown on its own in prose (inline code) has no
command around it, so it is composed with the group choices that give its keys, found in conf/
(`roles.judge.model.path=...` with `dataset=etapp`, `engine.base_url=...` with `engine=openai`).
Problems carry the page and the line, so a renamed option points at every place that names it.

To stay fast, jobs that make the same group choices are composed together (value overrides on
one config do not interact), each alone only where that fails; a sweep's or a pack's other
values of a key are checked on the composed config by typing it with the value set.
"""

from __future__ import annotations

import copy
import re
import shlex
import sys
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # run as a script: check this checkout's code, not whichever copy the venv installed
    sys.path.insert(0, str(REPO))

from grading.sweep import override_key  # noqa: E402
CONF = REPO / "conf"
GENERATED = ("reference/",)  # built from the code at site build time, not written by hand
# Commands composed against a user's own conf/ (the extension examples: their files are on the
# page, and tests/test_readme_example.py and tests/test_readme_multiturn.py run them as written).
USER_CONF = "hydra.searchpath=[file://$PWD/conf]"
# Spellings that stand for something the reader fills in: checked for the key only.
PLACEHOLDER_TOKENS = {"key=value", "group=option", "...", "[run]", "VERB", "[key=value", "[group=option"}
PLACEHOLDER_VALUE = re.compile(r"^(\.\.\.|[A-Z][A-Z0-9_]*|[a-z]|.*\([A-Z]\))$|<")
SHELL_LANGS = {"bash", "sh", "shell", "console"}  # blocks without a language are output or trees
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
SUBSHELL = re.compile(r"\$\(([^()]*)\)")
KEY = re.compile(r"^(\+\+|\+|~)?(?P<key>[A-Za-z_][\w/]*(?:[.@][\w<>/-]+)*)=")


@dataclass(frozen=True)
class Problem:
    page: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


@dataclass
class Snippet:
    """One command line or one inline override span, where it stands."""

    page: str
    line: int
    text: str
    inline: bool
    lines: tuple[str, ...] = ()
    """The source lines a command spans (continuations), to point at the one with a problem."""

    def line_of(self, token: str) -> int:
        """The line of the snippet that holds `token` (its first line where none does)."""
        return self.line + next((i for i, line in enumerate(self.lines) if token and token in line), 0)


def pages(root: Path = REPO) -> dict[str, str]:
    """README.md and every hand-written docs page, by path relative to the repository."""
    found = {"README.md": (root / "README.md").read_text(encoding="utf-8")}
    for path in sorted((root / "docs").rglob("*.md")):
        rel = path.relative_to(root / "docs").as_posix()
        if not rel.startswith(GENERATED):
            found[f"docs/{rel}"] = path.read_text(encoding="utf-8")
    return found


def snippets(page: str, text: str) -> Iterator[Snippet]:
    """Shell command lines of the page's code blocks (continuations joined, comments dropped) and
    its inline code spans, each with its line number."""
    blocks = []
    for block in FENCE.finditer(text):
        blocks.append(block.span())
        if block["lang"] not in SHELL_LANGS:
            continue
        first = text.count("\n", 0, block.start("body")) + 1
        pending, start, held = "", first, []
        for number, line in enumerate(block["body"].splitlines(), start=first):
            if not pending:
                start, held = number, []
            pending += line.rstrip()
            held.append(line)
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            yield Snippet(page, start, pending.strip(), inline=False, lines=tuple(held))
            pending = ""
    for span in INLINE.finditer(text):
        if not any(a <= span.start() < b for a, b in blocks):
            yield Snippet(page, text.count("\n", 0, span.start()) + 1, " ".join(span[2].split()), inline=True)


def commands(snippet: Snippet) -> list[list[str]]:
    """The `toolsweep ...` commands in a snippet (a `$(...)` inside one is a command of its own,
    its output a placeholder path), each as its tokens from `toolsweep` on."""
    text = snippet.text
    inner = [m[1] for m in SUBSHELL.finditer(text)]
    text = SUBSHELL.sub("/placeholder", text)
    found = []
    for part in [text, *inner]:
        if "toolsweep" not in part:
            continue
        tokens = shlex.split(part, comments=True)  # ValueError: unbalanced quotes, reported
        current: list[str] | None = None
        for token in tokens:
            if token in ("|", "||", "&&", ";") or token.endswith(";"):
                current = None
                continue
            name = token.rsplit("/", 1)[-1]
            if name == "toolsweep" or name.startswith("toolsweep-"):
                current = [name]
                found.append(current)
            elif current is not None:
                current.append(token)
    return found


@dataclass(frozen=True)
class Job:
    """One override list to compose, where it came from, and the group choices it needs."""

    snippet: Snippet
    overrides: tuple[str, ...]
    keys_only: tuple[str, ...] = ()
    """Overrides with a placeholder value (`dataset.limit=N`): only the key must exist."""
    context: tuple[str, ...] = ()
    alternatives: tuple[str, ...] = ()
    """A sweep's other values, `key=value` each: checked on the composed config."""

    @property
    def signature(self) -> tuple[str, ...]:
        """What decides the config's shape: the context and the group choices."""
        return self.context + tuple(sorted(o for o in self.overrides if is_group_choice(o)))

    def problem(self, error: str, override: str | None = None) -> Problem:
        """A problem at the line of the override the error names (or of `override`, a sweep's value)."""
        named = override or next((o for o in self.overrides + self.keys_only
                                  if f"'{override_key(o)}'" in error or override_key(o) in error.split(" ")), "")
        shown = override or " ".join(self.overrides + self.keys_only)
        return Problem(self.snippet.page, self.snippet.line_of(named.split("=", 1)[0]),
                       f"`{shown}` does not compose: {error}")


class Checker:
    """Checks snippets against the verbs and the config."""

    def __init__(self) -> None:
        import inference.cli  # noqa: F401  (registers the root schema and the resolvers conf/ uses)
        from inference.verbs import VERBS

        self.verbs = {v.name for v in VERBS}
        self.default = keys_of(self._compose(()))
        self.roots = {k.split(".")[0] for k in self.default} | {p.name for p in CONF.iterdir() if p.is_dir()}
        self.choices = group_choices()

    @lru_cache(maxsize=None)
    def flags(self, verb: str) -> frozenset[str]:
        from inference.verbs import verb_parser

        return frozenset(s for a in verb_parser(verb)._actions for s in a.option_strings)

    def check(self, found: dict[str, str]) -> list[Problem]:
        """Every problem of the given pages ({page: text})."""
        problems: list[Problem] = []
        jobs: list[Job] = []
        for page, text in found.items():
            for snippet in snippets(page, text):
                problems += self._snippet(snippet, jobs)
        return problems + self._compose_all(jobs)

    def _snippet(self, snippet: Snippet, jobs: list[Job]) -> list[Problem]:
        try:
            cmds = commands(snippet)
        except ValueError as exc:
            return [Problem(snippet.page, snippet.line, f"`{snippet.text}`: cannot be read as a shell line ({exc})")]
        if not cmds and snippet.inline:
            tokens = [t for t in prose_tokens(snippet.text) if t not in ("-m", "--multirun")]
            if tokens and all(self._is_override(t) for t in tokens):
                return self._jobs(snippet, tokens, sweeps=True, exact=False, into=jobs)
            return []
        problems = []
        for tokens in cmds:
            problems += self._command(snippet, tokens, jobs)
        return problems

    def _is_override(self, token: str) -> bool:
        m = KEY.match(token)
        return bool(m) and re.split(r"[./@]", m["key"])[0] in self.roots

    def _command(self, snippet: Snippet, tokens: list[str], jobs: list[Job]) -> list[Problem]:
        head, args = tokens[0], tokens[1:]
        verb = head.removeprefix("toolsweep-") if head != "toolsweep" else None
        if verb is None:
            verb = "run"
            if args and not args[0].startswith("-") and "=" not in args[0] and args[0] not in PLACEHOLDER_TOKENS:
                verb, args = args[0], args[1:]
        if verb in PLACEHOLDER_TOKENS:
            return []
        if verb not in self.verbs:
            return [Problem(snippet.page, snippet.line, f"`{' '.join(tokens)}`: no verb {verb!r} "
                            f"(the verbs: {sorted(self.verbs)})")]
        problems = [Problem(snippet.page, snippet.line, f"`{' '.join(tokens)}`: toolsweep {verb} has no option {flag}")
                    for flag in (a.split("=")[0] for a in args if re.match(r"^--?[A-Za-z]", a))
                    if flag not in self.flags(verb)]
        if verb in ("run", "judge") and USER_CONF not in args:
            overrides = [a for a in args if "=" in a and not a.startswith("-") and a not in PLACEHOLDER_TOKENS]
            # a run composes as written; judge's overrides go on top of the judged run's own
            problems += self._jobs(snippet, overrides, sweeps="-m" in args or "--multirun" in args,
                                   exact=verb == "run", into=jobs)
        return problems

    def _jobs(self, snippet: Snippet, tokens: list[str], sweeps: bool, exact: bool, into: list[Job]) -> list[Problem]:
        """The jobs of one override list: one per value of a group-choice sweep (and of a prose
        `a|b` alternative); a value sweep's other values ride along as alternatives."""
        tokens = [t for t in tokens if "<" not in t.split("=", 1)[0]]  # `roles.<name>.x=...`: a pattern
        keys_only = tuple(t for t in tokens if PLACEHOLDER_VALUE.search(t.split("=", 1)[1]))
        given = [t for t in tokens if t not in keys_only]
        if not exact:
            given = [alternatives_as_sweep(t) for t in given]
        try:
            variants, alternatives = expand(given, sweeps)
        except ValueError as exc:
            return [Problem(snippet.page, snippet.line, f"`{snippet.text}`: {exc}")]
        for variant in variants:
            context = () if exact else self._context(tuple(variant) + keys_only)
            into.append(Job(snippet, tuple(variant), keys_only, context, tuple(alternatives)))
        return []

    def _context(self, overrides: tuple[str, ...]) -> tuple[str, ...]:
        """The group choices (`dataset=etapp`, `engine=openai`, ...) that give the keys these
        overrides set and the default config lacks, from groups the overrides do not choose themselves."""
        chosen = frozenset(override_key(o) for o in overrides if is_group_choice(o))
        context: list[str] = []
        for override in overrides:
            key = needed_key(override)
            if key is None or key in self.default:
                continue
            choice = self._provider(key, chosen)
            if choice is not None and choice not in context:
                context.append(choice)
        return tuple(context)

    @lru_cache(maxsize=None)
    def _provider(self, key: str, chosen: frozenset[str]) -> str | None:
        """The first group choice whose config has `key`: the group the key is under first
        (`engine.base_url`: the engines), composing each candidate only when asked."""
        root = key.split(".")[0]
        candidates = sorted((c for c in self.choices if c.split("=")[0] not in chosen),
                            key=lambda c: c.split("=")[0].replace("/", ".") != root and
                            not root.startswith(c.split("=")[0].replace("/", ".")))
        return next((c for c in candidates if key in keys_of(self._compose((c,)))), None)

    def _compose_all(self, jobs: list[Job]) -> list[Problem]:
        """Compose the jobs of each signature together: one value per key, the others checked as
        alternatives on that config; a signature whose pack fails is composed job by job."""
        problems = []
        by_signature: dict[tuple[str, ...], list[Job]] = {}
        for job in jobs:
            by_signature.setdefault(job.signature, []).append(job)
        for signature, group in by_signature.items():
            first: dict[str, str] = {}
            for override in (o for job in group for o in job.overrides if not is_group_choice(o)):
                first.setdefault(override_key(override), override)
            merged = signature + tuple(first.values())
            keys_only = tuple(dict.fromkeys(k for job in group for k in job.keys_only))
            if self._error(merged, keys_only) is None:
                rest = {o for job in group for o in (*job.overrides, *job.alternatives)} - set(merged)
                failed = {o for o in rest if self._alternative(merged, o)}
                # a value refused beside another job's values (`dataset.methods=[fc]` beside
                # `dataset.reasoning=true`) is a finding only where its own job refuses it too
                group = [job for job in group if failed & {*job.overrides, *job.alternatives}]
            for job in group:
                problems += self._alone(job)
        return problems

    def _alone(self, job: Job) -> list[Problem]:
        """The problems of one job composed by itself, its sweep's other values on its config."""
        error = self._error(job.context + job.overrides, job.keys_only)
        if error:
            return [job.problem(error)]
        return [job.problem(e, o) for o in job.alternatives if (e := self._alternative(job.context + job.overrides, o))]

    @lru_cache(maxsize=None)
    def _error(self, overrides: tuple[str, ...], keys_only: tuple[str, ...]) -> str | None:
        """Why these overrides do not compose and type, or None."""
        try:
            data = self._compose(overrides)
            keys = keys_of(data)
            missing = [k for t in keys_only if (k := needed_key(t)) is not None and k not in keys]
            if missing:
                return f"{missing[0]} is not an option"
            _type(data)
        except Exception as exc:  # noqa: BLE001  (any failure of composition or typing is the finding)
            return describe(exc)
        return None

    @lru_cache(maxsize=None)
    def _alternative(self, overrides: tuple[str, ...], override: str) -> str | None:
        """Why the config these overrides compose does not type with `override`'s value set, or None."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:
            parsed = OverridesParser.create().parse_override(override)
            key = override_key(override)
            if key not in keys_of(self._compose(overrides)):
                return f"{key} is not an option"
            if key.startswith("hydra."):
                return None  # Hydra's own part: its first value composed, the rest are its to read
            data = copy.deepcopy(self._compose(overrides))
            node = data
            *path, last = key.split(".")
            for part in path:
                node = node[part]
            node[last] = parsed.value()
            _type(data)
        except Exception as exc:  # noqa: BLE001
            return describe(exc)
        return None

    @lru_cache(maxsize=None)
    def _compose(self, overrides: tuple[str, ...]) -> dict:
        """The config composed with these overrides, Hydra's own part included, resolved."""
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf, open_dict

        with warnings.catch_warnings(), initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            warnings.simplefilter("ignore")
            cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
            hydra = OmegaConf.to_container(cfg.hydra, resolve=False)
            with open_dict(cfg):
                del cfg["hydra"]
            return {**OmegaConf.to_container(cfg, resolve=True), "hydra": hydra}


def prose_tokens(text: str) -> list[str]:
    """An inline span's tokens as a shell reads them, a `<placeholder with spaces>` one token, an
    environment variable holding overrides (`ARGS="dataset=x dataset.limit=10"`) its overrides."""
    text = re.sub(r"<[^<>]*>", lambda m: m[0].replace(" ", "_"), text)
    try:
        tokens = shlex.split(text)
        env = re.fullmatch(r"[A-Z][A-Z0-9_]*=(.*)", tokens[0]) if len(tokens) == 1 else None
        return shlex.split(env[1]) if env else tokens
    except ValueError:
        return text.split()


def describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"


def group_choices() -> list[str]:
    """Every option of the groups whose options add keys: datasets, engines, launchers, sweepers."""
    found = [f"{folder.relative_to(CONF).as_posix()}={path.stem}"
             for folder in (CONF / "dataset", CONF / "engine", CONF / "hydra" / "launcher")
             for path in sorted(folder.glob("*.yaml"))]
    return found + ["hydra/sweeper=race"]


def keys_of(data: dict, prefix: str = "") -> frozenset[str]:
    """Every dotted key of a nested dict, intermediate ones included."""
    found = set()
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        found.add(dotted)
        if isinstance(value, dict):
            found |= keys_of(value, f"{dotted}.")
    return frozenset(found)


def needed_key(override: str) -> str | None:
    """The config key an override needs to exist: `a.b` for `a.b=x`, the package for
    `engine@roles.judge.engine=x`; None for a new key (`+a=x`) or a root group choice."""
    m = KEY.match(override)
    if m is None or override.startswith(("+", "~")):
        return None
    key = m["key"]
    if "@" in key:
        return key.split("@", 1)[1]
    return None if "/" in key or "." not in key else key


def is_group_choice(override: str) -> bool:
    m = KEY.match(override)
    key = m["key"] if m else ""
    return bool(m) and ("/" in key or "@" in key or (CONF / key).is_dir())


def alternatives_as_sweep(token: str) -> str:
    """Prose writes choices as `a|b` (`decoding.constraint=outlines|xgrammar`): a sweep over them."""
    key, _, value = token.partition("=")
    return f"{key}={value.replace('|', ',')}" if re.fullmatch(r"[\w.-]+(\|[\w.-]+)+", value) else token


def expand(tokens: list[str], sweeps: bool) -> tuple[list[list[str]], list[str]]:
    """The override lists to compose (one per value of a group-choice sweep, every other sweep at
    its first value) and the value sweeps' other values as `key=value`. Without `sweeps`, a sweep
    is an error (a run without -m refuses one)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    choices: list[list[str]] = []
    alternatives: list[str] = []
    for token in tokens:
        try:
            override = parser.parse_override(token)
        except HydraException as exc:
            raise ValueError(f"{token} is not an override Hydra reads ({str(exc).strip().splitlines()[0]})") from None
        if not override.is_sweep_override():
            choices.append([token])
            continue
        if not sweeps:
            raise ValueError(f"{token} is a sweep: it needs -m")
        key = override.get_key_element()
        values = [f"{key}={value}" for value in override.sweep_string_iterator()]
        choices.append(values if is_group_choice(token) else values[:1])
        alternatives += [] if is_group_choice(token) else values[1:]
    first = [c[0] for c in choices]
    variants = [first] + [first[:i] + [v] + first[i + 1:] for i, values in enumerate(choices) for v in values[1:]]
    return variants, alternatives


def _type(data: dict) -> None:
    """Type the composed config as a run does (required values filled with placeholders), and
    refuse the values a run refuses before it reads any file (`inference.config.value_problems`:
    the choices, a benchmark's settings and its own options), each with the values it accepts."""
    from inference.config import value_problems
    from inference.errors import ConfigError
    from inference.run import run_config

    typed = _filled({k: v for k, v in data.items() if k != "hydra"})
    problems = [p for p in value_problems(*run_config(typed)) if not _about_a_path(p, typed)]
    if problems:
        raise ConfigError("; ".join(problems))


def _about_a_path(problem: str, data: dict) -> bool:
    """Whether the problem is with a path's target (`dataset.bfcl_eval '/src/gorilla' holds no ...`):
    a path a page shows stands for the reader's own file, which the check cannot judge."""
    node: object = data
    for part in re.split(r"[ =]", problem, maxsplit=1)[0].split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return isinstance(node, str) and "/" in node


def _filled(node: object) -> object:
    if isinstance(node, dict):
        return {k: _filled(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_filled(v) for v in node]
    return "placeholder" if node == "???" else node


def check_pages(found: dict[str, str] | None = None) -> list[Problem]:
    """Every problem of the README and the docs pages (or of the given {page: text})."""
    return Checker().check(pages() if found is None else found)


if __name__ == "__main__":  # python tests/docs_check.py [PAGE ...]: list every problem (of these pages)
    found = check_pages({p: (REPO / p).read_text(encoding="utf-8") for p in sys.argv[1:]} or None)
    print("\n".join(map(str, found)) or "no problems")
    sys.exit(1 if found else 0)
