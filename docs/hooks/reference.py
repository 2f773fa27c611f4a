"""The reference pages, generated from the code each time the site is built (mkdocs hook).

- reference/config.md: every option of the typed config dataclasses (the root schema registered
  with Hydra's ConfigStore, each benchmark's own options class, each engine's), with its type,
  default and attribute docstring; the config groups under conf/; the racing sweeper's and the
  local launcher's options.
- reference/commands.md: every verb's options, from the parser its main builds.
- reference/outputs.md: the columns and types of every table a run, a sweep or a verb writes,
  from the schemas the writers use.

Nothing here is committed: a page that could go stale is rebuilt from the code instead.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
import textwrap
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    if str(ROOT) not in sys.path:  # the checkout this site documents, ahead of any installed copy
        sys.path.insert(0, str(ROOT))  # (mkdocs restores sys.path after loading a hook)
    return {"reference/config.md": config_page(), "reference/commands.md": commands_page(),
            "reference/outputs.md": outputs_page()}


# --- configuration -------------------------------------------------------------------------------

def attribute_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings (a string right after an assignment) of a class and its bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue  # builtins, classes made at run time
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:]):
            target = node.target if isinstance(node, ast.AnnAssign) else (
                node.targets[0] if isinstance(node, ast.Assign) else None)
            if isinstance(target, ast.Name) and isinstance(after, ast.Expr) \
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                docs[target.id] = inspect.cleandoc(after.value.value)
    return docs


def default_text(field: Any) -> str:
    """A field's default as YAML writes it; `???` where the value is required."""
    if field.default is not MISSING:
        value = field.default
    elif field.default_factory is not MISSING:
        value = field.default_factory()
    else:
        return "???"
    if is_dataclass(value):
        return "(options below)"
    if value == "???":
        return "??? (required)"
    return json.dumps(value) if not isinstance(value, str) else (value or '""')


def option_rows(cls: type, prefix: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """Markdown table rows, one per field of dataclass `cls` (nested dataclasses are listed apart)."""
    docs = attribute_docs(cls)
    rows = []
    for f in fields(cls):
        if f.name in skip or f.name.startswith("_"):
            continue
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append(f"| `{prefix}{f.name}` | `{kind}` | `{default_text(f)}` | {_cell(docs.get(f.name, ''))} |")
    return rows


def option_table(cls: type, prefix: str, skip: frozenset[str] = frozenset()) -> str:
    return "\n".join(["| option | type | default | meaning |", "|---|---|---|---|", *option_rows(cls, prefix, skip)])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def dataset_choices() -> dict[str, list[str]]:
    """benchmark name -> the conf/dataset options (`dataset=X`) that choose it."""
    chosen: dict[str, list[str]] = {}
    for path in sorted((CONF / "dataset").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        name = (data.get("dataset") or {}).get("name") if "dataset" in data else data.get("name")
        chosen.setdefault(str(name), []).append(path.stem)
    return chosen


def config_page() -> str:
    from inference.benchmarks import benchmark_names, get_benchmark
    from inference.config import DatasetConfig, RoleConfig, ToolsweepConfig
    from inference.verbs import yaml_options

    nested = {f.name for f in fields(ToolsweepConfig)
              if f.default_factory is not MISSING and is_dataclass(f.default_factory())}
    out = ["# Configuration reference", "",
           "Generated from the typed config dataclasses when this site is built: every option a run "
           "takes, its type, its default (`???`: required) and its docstring. Set any of them on the "
           "command line (`toolsweep key=value ...`) or in a YAML under `conf/`. An option the chosen "
           "part does not have is an error naming it, before any model loads.", "",
           "## Root options", "",
           "The root schema (`inference/config.py: ToolsweepConfig`, stored in Hydra's ConfigStore as "
           "`toolsweep_schema`, which `conf/config.yaml` extends).", "",
           option_table(ToolsweepConfig, "", frozenset({"dataset", "engine", *nested}))]
    for f in fields(ToolsweepConfig):
        if f.name in nested:
            default = f.default_factory()
            out += ["", f"### `{f.name}.*`", "", _doc_line(type(default)), option_table(type(default), f"{f.name}.")]
            for inner in fields(default):  # a part with options of its own (export.mlflow.*)
                value = getattr(default, inner.name)
                if is_dataclass(value):
                    prefix = f"{f.name}.{inner.name}."
                    out += ["", f"#### `{prefix}*`", "", _doc_line(type(value)), option_table(type(value), prefix)]
    out += ["", "### `roles.<name>.*`", "", _doc_line(RoleConfig),
            option_table(RoleConfig, "roles.<name>.", frozenset({"model", "decoding"})),
            "", "`roles.<name>.model.*` and `roles.<name>.decoding.*` take the options of `model.*` and "
            "`decoding.*` above; `roles.<name>.engine.*` those of the engine chosen for the role.", ""]
    out += ["## Dataset options", "", _doc_line(DatasetConfig),
            "Every benchmark has these:", "", option_table(DatasetConfig, "dataset.")]
    choices = dataset_choices()
    base = frozenset(f.name for f in fields(DatasetConfig))
    for name in benchmark_names():
        options = get_benchmark(name).options
        chosen = ", ".join(f"`dataset={c}`" for c in choices.get(name, [])) or "`dataset.name=" + name + "`"
        rows = option_rows(options, "dataset.", base)
        out += ["", f"### {name}", "", f"Chosen by {chosen}; options class `{options.__module__}.{options.__name__}`.", ""]
        out += ["| option | type | default | meaning |", "|---|---|---|---|", *rows] if rows else \
            ["No options beyond the ones every benchmark has."]
    out += ["", "## Engine options", "",
            "`engine=NAME` (or `engine@roles.<name>.engine=NAME`) chooses one; each is typed by the "
            "`CONFIG` of the module its `target` names.", ""]
    for name, line in yaml_options(CONF / "engine", width=160):
        data = yaml.safe_load((CONF / "engine" / f"{name}.yaml").read_text(encoding="utf-8")) or {}
        schema = importlib.import_module(data["target"].partition(":")[0]).CONFIG
        out += [f"### engine={name}", "", line, "", f"Options class `{schema.__module__}.{schema.__name__}`.", "",
                option_table(schema, "engine."), ""]
    out += ["## Config groups", "", "Every option of every group under `conf/` (`group=option`):", ""]
    for folder in sorted(p for p in CONF.rglob("*") if p.is_dir() and any(p.glob("*.yaml"))):
        group = folder.relative_to(CONF).as_posix()
        out += [f"### {group}", "", "| option | what it is |", "|---|---|",
                *[f"| `{group}={name}` | {_cell(line)} |" for name, line in yaml_options(folder, width=160)], ""]
    from hydra_plugins.toolsweep_race.race_sweeper import RaceSweeperConf

    out += ["## Racing sweeper", "", "`-m hydra/sweeper=race` (see [Racing](../racing.md)); its options:", "",
            option_table(RaceSweeperConf, "hydra.sweeper."), ""]
    from hydra_plugins.toolsweep_launcher.warm_launcher import WarmLauncherConf

    out += ["## Local launcher", "", "`-m hydra/launcher=local`, the default (see [Sweeps](../sweeps.md)); its options:",
            "", option_table(WarmLauncherConf, "hydra.launcher."), ""]
    return "\n".join(out) + "\n"


def _doc_line(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return "" if doc.startswith(f"{cls.__name__}(") else " ".join(doc.split()) + "\n"


# --- commands ------------------------------------------------------------------------------------

def commands_page() -> str:
    from inference.cli import help_text
    from inference.verbs import VERBS, verb_parser

    out = ["# Command reference", "",
           "Generated from the parsers the verbs build (`inference/verbs.py`), when this site is built.", "",
           "```text", help_text().rstrip(), "```", ""]
    for verb in VERBS:
        parser = verb_parser(verb.name)
        out += [f"## toolsweep {verb.name}", "", verb.summary, "", "| argument | meaning | default |", "|---|---|---|"]
        for action in parser._actions:
            if action.help == "==SUPPRESS==":
                continue
            name = ", ".join(action.option_strings) or action.dest.upper()
            if action.choices:
                name += " {" + ",".join(map(str, action.choices)) + "}"
            default = "" if action.default in (None, False, [], "==SUPPRESS==") or not action.option_strings \
                else f"`{action.default}`"
            out.append(f"| `{name}` | {_cell(action.help or '')} | {default} |")
        out += [""]
    return "\n".join(out) + "\n"


# --- output files --------------------------------------------------------------------------------

# (file, where its columns are declared, what it is). A callable takes a scorer name.
TABLES: tuple[tuple[str, str, str], ...] = (
    ("samples.parquet", "grading.report:BASE_SAMPLE_SCHEMA",
     "one row per sample: these columns, then the scorer's inputs and its grade columns (per scorer below)"),
    ("metrics.parquet", "grading.metrics:KEY_COLUMNS",
     "one row per setting x reading: these keys, then the scorer's metrics and counts (per scorer below)"),
    ("passk.parquet", "grading.repeats:CURVE_SCHEMA", "pass@k and pass^k for every k (decoding.samples > 1)"),
    ("parts/part-NNNNN.parquet", "inference.cache:PART_SCHEMA",
     "one finished shard of generations (also the cross-run cache's parts)"),
    ("leaderboard.parquet", "grading.leaderboard:BASE_SCHEMA",
     "a sweep's board: these columns, the scorers' metrics with CIs, then the tail below"),
    ("leaderboard.parquet (tail)", "grading.leaderboard:TAIL_SCHEMA", "the board's last columns"),
    ("comparison.parquet", "grading.compare:COMPARISON_SCHEMA",
     "toolsweep compare; against_first.parquet has these with a leading `job`"),
    ("flips.parquet", "grading.compare:FLIP_SCHEMA", "toolsweep compare: the samples that flipped"),
    ("history_moves.parquet", "grading.compare:MOVES_SCHEMA", "toolsweep compare of a full run and its swap twin"),
    ("agreement.parquet", "grading.agreement:AGREEMENT_SCHEMA", "toolsweep agreement, per dimension"),
    ("ranking.parquet", "grading.agreement:RANKING_SCHEMA", "toolsweep agreement of two sweeps"),
    ("steps/0.parquet (ETAPP's agent columns)", "inference.benchmarks.etapp.agent_solver:EPISODE_SCHEMA",
     "ETAPP: the columns the agent adds to the sample table"),
)


def declared(target: str) -> tuple[dict[str, str], dict[str, str]]:
    """(column -> type, column -> the comment beside it in the source) of a `module:NAME` schema."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    schema = getattr(module, attribute)
    if hasattr(schema, "names") and hasattr(schema, "types"):  # a pyarrow schema
        columns = {n: str(t) for n, t in zip(schema.names, schema.types)}
    else:
        columns = {n: str(t) for n, t in schema.items()}
    return columns, _column_comments(inspect.getsource(module), attribute)


def _column_comments(source: str, attribute: str) -> dict[str, str]:
    """Comments that end the source line of a column's key, inside the assignment of `attribute`."""
    lines = source.splitlines()
    for node in ast.parse(source).body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
            found = {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Dict):
                    for key in sub.keys:
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            line = lines[key.lineno - 1]
                            if "  # " in line and line.count('"') % 2 == 0:
                                found[key.value] = line.split("  # ", 1)[1].strip()
            return found
    return {}


def column_table(columns: dict[str, str], notes: dict[str, str] | None = None) -> str:
    notes = notes or {}
    return "\n".join(["| column | type | note |", "|---|---|---|",
                      *[f"| `{c}` | {t} | {_cell(notes.get(c, ''))} |" for c, t in columns.items()]])


def outputs_page() -> str:
    from grading.leaderboard import leaderboard_schema
    from grading.metrics import metrics_schema
    from grading.slices import slices_schema
    from grading.report import BASE_SAMPLE_SCHEMA, sample_schema
    from grading.scoring import get_scorer, scorer_names

    out = ["# Output files reference", "",
           "Generated from the schemas the writers use, when this site is built: every table's columns "
           "and types. What each file is for: [What a run writes](../outputs.md).", ""]
    for name, target, what in TABLES:
        columns, notes = declared(target)
        out += [f"## {name}", "", f"{what} (`{target}`).", "", column_table(columns, notes), ""]
    out += side_tables_section()
    out += ["## Per scorer", "",
            "The tables of a run graded by each scorer (`grading/scorers/`), and of a sweep of such runs: "
            "their columns follow from what the scorer declares.", ""]
    _, sample_notes = declared("grading.report:BASE_SAMPLE_SCHEMA")
    for name in scorer_names():
        scorer = get_scorer(name)
        samples = {c: str(t) for c, t in sample_schema(scorer).items() if c not in BASE_SAMPLE_SCHEMA}
        metrics = {c: str(t) for c, t in metrics_schema(scorer).items()}
        out += [f"### {name}", "", f"readings: {', '.join(f'`{r}`' for r in scorer.readings)}", "",
                "samples.parquet, after the common columns:", "", column_table(samples), "",
                "metrics.parquet:", "", column_table(metrics, _metric_notes(scorer)), "",
                "slices.parquet (the metrics per band of each slice):", "",
                column_table({c: str(t) for c, t in slices_schema(scorer).items()}), "",
                "leaderboard.parquet of a sweep of this scorer's runs:", "",
                column_table({c: str(t) for c, t in leaderboard_schema([scorer]).items()}), ""]
    return "\n".join(out) + "\n"


def side_tables_section() -> list[str]:
    """Every side table a benchmark's solvers declare (grading.views.SideTable), with its columns
    where the declaration carries its schema."""
    from inference.benchmarks import benchmark_names, get_benchmark
    from inference.solvers import get_solver, side_tables_of

    out = ["## Side tables", "",
           "Per-sample tables a benchmark's solvers declare and write beside samples.parquet; a run "
           "lists those it wrote in run.json (`side_tables`), and merge and the case view read that list.", ""]
    for benchmark in (get_benchmark(n) for n in benchmark_names()):
        for solver_name in benchmark.solvers:
            solver = get_solver(solver_name)
            for table in side_tables_of(solver):
                out += [f"### {table.name}", "",
                        f"{benchmark.name}, written by `{solver_name}` (kind `{table.kind}`, keyed by "
                        f"`{table.key}`{', ordered by ' + ', '.join(f'`{c}`' for c in table.order) if table.order else ''}): "
                        f"{table.description}.", ""]
                if table.schema is not None:
                    out += [column_table({c: str(t) for c, t in table.schema.items()},
                                         _schema_notes(sys.modules[type(solver).__module__], table.schema)), ""]
    return out


def _schema_notes(module: Any, schema: Any) -> dict[str, str]:
    """The source comments beside a schema's columns, found by the module attribute holding it."""
    name = next((k for k, v in vars(module).items() if v is schema), None)
    return _column_comments(inspect.getsource(module), name) if name else {}


def _metric_notes(scorer: Any) -> dict[str, str]:
    """A metric's description and which way is better."""
    notes = {}
    for metric in scorer.metrics:
        better = {True: "higher is better", False: "lower is better", None: "no better direction"}.get(
            getattr(metric, "higher_is_better", None), "")
        description = getattr(metric, "description", "") or ""
        notes[metric.name] = "; ".join(p for p in (description, better) if p)
    return notes


if __name__ == "__main__":  # print one page: python docs/hooks/reference.py reference/config.md
    print(pages()[sys.argv[1]] if len(sys.argv) > 1 else "\n".join(pages()))
