"""The manual: the offline docs site builds (strictly, with its reference generated from the code),
fetches nothing, and every command and override its pages show still works (tests/docs_check.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.docs_check import Checker, pages, snippets
from tests.grading.test_html_report import browser  # noqa: F401  (the headless chromium fixture)

SITE_CONFIG = REPO / "mkdocs.yml"
# Absolute URLs a built file may not load: a script, a stylesheet or a font from elsewhere.
HTML_LOADS = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=[\"']?(?:https?:)?//", re.I)
CSS_LOADS = re.compile(r"@import\s+(?:url\()?\s*[\"']?(?:https?:)?//|url\(\s*[\"']?(?:https?:)?//", re.I)
JS_LOADS = re.compile(r"\w\(\s*[\"'`](https?://[^\"'`]+)[\"'`]\s*\)")
# The theme's bundle loads two scripts from elsewhere, each only when its guard holds, which it
# never does here: a ResizeObserver polyfill for browsers without one (every browser since 2020
# has it), and a diagram library for pages with mermaid diagrams (none: checked below).
GUARDED_LOADS = ('typeof ResizeObserver=="undefined"', 'typeof mermaid=="undefined"')


def nav_pages(nav: list) -> list[str]:
    """Every page path in mkdocs.yml's nav."""
    found = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as `make docs` builds it (strict: a warning, a broken link or anchor fails)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(SITE_CONFIG), "-d", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker()


def test_every_nav_page_is_built_and_written_by_hand_or_generated(site):
    config = yaml.safe_load(SITE_CONFIG.read_text(encoding="utf-8"))
    nav = nav_pages(config["nav"])
    assert config["use_directory_urls"] is False and config["theme"]["font"] is False
    generated = [p for p in nav if p.startswith("reference/")]
    assert generated == ["reference/config.md", "reference/commands.md", "reference/outputs.md"]
    for page in nav:
        assert (site / page).with_suffix(".html").is_file(), page
        assert (REPO / "docs" / page).is_file() != (page in generated), f"{page}: by hand xor generated"
    assert not (REPO / "docs" / "reference").exists(), "the reference is generated at build time, never committed"


def test_the_site_loads_no_script_stylesheet_or_font_from_elsewhere(site):
    loads = []
    for path in site.rglob("*"):
        if path.suffix in (".html", ".css", ".js"):
            text = path.read_text(encoding="utf-8", errors="replace")
            pattern = {".html": HTML_LOADS, ".css": CSS_LOADS}.get(path.suffix)
            if pattern is not None:
                loads += [f"{path.relative_to(site)}: {m[0]}" for m in pattern.finditer(text)]
            if "fonts.googleapis" in text or "fonts.gstatic" in text:
                loads.append(f"{path.relative_to(site)}: a web font")
            if path.suffix == ".js":
                loads += [f"{path.relative_to(site)}: {m[1]}" for m in JS_LOADS.finditer(text)
                          if not any(guard in text[max(0, m.start() - 120):m.start()] for guard in GUARDED_LOADS)]
    assert loads == []
    assert not any('class="mermaid"' in p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    assert (site / "search" / "search_index.js").is_file(), "the offline plugin inlines the search index"


def test_the_site_opens_from_file_and_searches_with_nothing_fetched(site, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get((site / "benchmarks" / "etapp.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "input.md-search__input").send_keys("xgrammar")
    found = []
    for _ in range(50):
        found = browser.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
        if found:
            break
        time.sleep(0.1)
    assert found, "search found nothing from file://"
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert [u for u in fetched if not u.startswith("file:")] == []
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_reference_lists_every_option_verb_flag_and_column():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "docs" / "hooks" / "reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    from grading.report import BASE_SAMPLE_SCHEMA
    from inference.benchmarks import benchmark_names, get_benchmark
    from inference.config import DecodingConfig, ModelConfig
    from inference.verbs import VERBS, verb_parser

    config, commands, outputs = (reference.pages()[f"reference/{n}.md"] for n in ("config", "commands", "outputs"))
    for schema, prefix in ((DecodingConfig, "decoding."), (ModelConfig, "model.")):
        assert all(f"`{prefix}{f.name}`" in config for f in fields(schema))
    for name in benchmark_names():
        assert all(f"`dataset.{f.name}`" in config for f in fields(get_benchmark(name).options))
    assert "Model calls per case" in config  # an attribute docstring (ETAPP's max_turns)
    for verb in VERBS:
        assert f"## toolsweep {verb.name}" in commands
        assert all(s in commands for a in verb_parser(verb.name)._actions for s in a.option_strings)
    assert all(f"`{column}`" in outputs for column in BASE_SAMPLE_SCHEMA)


def test_verb_parser_builds_each_parser_without_running_the_verb():
    from inference.verbs import VERBS, verb_parser

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        parsers = {verb.name: verb_parser(verb.name) for verb in VERBS}
    assert printed.getvalue() == ""  # `ls` would have listed, `prepare-model` would have built
    assert all(p.prog == f"toolsweep {name}" for name, p in parsers.items())
    assert "--multirun" in parsers["run"].format_help() and "--overwrite" in parsers["judge"].format_help()


def test_every_documented_command_and_override_works(checker):
    found = pages()
    assert {"README.md", "docs/extending.md", "docs/benchmarks/etapp.md"} <= set(found)
    checked = [s for page, text in found.items() for s in snippets(page, text) if "toolsweep" in s.text]
    assert len(checked) > 100  # the check reads the pages it should
    assert [str(p) for p in checker.check(found)] == []


def test_a_renamed_option_is_reported_at_every_page_and_line_that_names_it(checker):
    found = {page: pages()[page].replace("decoding.constraint", "decoding.constrant")
             for page in ("README.md", "docs/constrained-decoding.md", "docs/benchmarks/familytool.md")}
    reported = {(p.page, p.line) for p in checker.check(found) if "decoding.constrant" in p.text}
    named = {(page, number) for page, text in found.items()
             for number, line in enumerate(text.splitlines(), start=1) if "decoding.constrant=" in line}
    assert named and named <= reported, sorted(named - reported)


def test_an_unknown_verb_flag_or_value_is_reported_with_its_page_and_line(checker):
    page = ("# Planted\n\nGrade with `toolsweep grad RUN_DIR`.\n\n```bash\n"
            "toolsweep compare RUN_A RUN_B --outt DIR\n"
            "toolsweep dataset=etapp dataset.path=/data/etapp \\\n    dataset.methodz=[fc]\n"
            "toolsweep -m decoding.constraint=outlines,xgrammer\n```\n\n"
            "The judge: `roles.judge.model.pth=/models/judge`.\n")
    problems = {(p.page, p.line): p.text for p in checker.check({"docs/planted.md": page})}
    assert set(problems) == {("docs/planted.md", n) for n in (3, 6, 8, 9, 12)}, problems
    assert "no verb 'grad'" in problems[("docs/planted.md", 3)]
    assert "has no option --outt" in problems[("docs/planted.md", 6)]
    assert "dataset.methodz" in problems[("docs/planted.md", 8)]
    assert "xgrammer" in problems[("docs/planted.md", 9)]
    assert "roles.judge.model.pth" in problems[("docs/planted.md", 12)]


def test_a_value_a_run_refuses_is_reported_with_its_page_line_and_the_accepted_values(checker, tmp_path):
    """The check refuses what a run refuses before any model loads (inference.config.value_problems),
    in a command and in prose, with the values the option accepts."""
    from inference.benchmarks.petoolbench.history import HISTORY_MODES
    from inference.config import CONSTRAINTS

    plants = {"README.md": ("decoding.constraint=xgrammar", "decoding.constraint=xgramar"),
              "docs/benchmarks/petoolbench.md": ("`dataset.history=none`", "`dataset.history=swapp`"),
              "docs/benchmarks/etapp.md": ("dataset.settings=[tool_given] dataset.max_turns=4",
                                           "dataset.settings=[tool_givn] dataset.max_turns=4")}
    (tmp_path / "docs" / "benchmarks").mkdir(parents=True)
    planted = {}
    for page, (good, bad) in plants.items():
        text = (REPO / page).read_text(encoding="utf-8")
        assert good in text, f"{page} no longer shows {good}: plant elsewhere"
        (tmp_path / page).write_text(text.replace(good, bad, 1), encoding="utf-8")
        planted[page] = text[:text.index(good)].count("\n") + 1
    found = {page: text for page, text in pages(tmp_path).items() if page in plants}
    problems = {(p.page, p.line): p.text for p in checker.check(found)}
    assert set(problems) == set(planted.items()), problems
    accepted = {"README.md": f"decoding.constraint must be one of {list(CONSTRAINTS)}, got 'xgramar'",
                "docs/benchmarks/petoolbench.md": f"dataset.history must be one of {list(HISTORY_MODES)}, got 'swapp'",
                "docs/benchmarks/etapp.md": "dataset.settings must be a non-empty subset of ['tool_given', "}
    for page, line in planted.items():
        assert accepted[page] in problems[(page, line)], problems[(page, line)]


def test_the_check_run_as_a_script_checks_this_checkouts_code(tmp_path):
    """`python tests/docs_check.py` imports this checkout's packages, not an installed copy of
    another one (a venv installed from elsewhere, here a `grading` that cannot be imported)."""
    (tmp_path / "grading").mkdir()
    (tmp_path / "grading" / "__init__.py").write_text('raise ImportError("an installed copy of another checkout")\n')
    done = subprocess.run([sys.executable, str(REPO / "tests" / "docs_check.py"), "docs/outputs.md"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=300)
    assert (done.returncode, done.stdout.strip()) == (0, "no problems"), done.stderr[-2000:]
