"""report.html per run, sweep and comparison: self-contained, the same numbers as the Parquet
reports, jobs named by their differing overrides, and a real headless browser that opens each page.

The browser is Debian's chromium with its chromedriver, driven by selenium with the driver path
given (so Selenium Manager never tries to download one). `make install` installs them where it
can; `make test` sets TOOLSWEEP_REQUIRE_BROWSER=1, so there a missing browser fails the test.
Run outside the Makefile without a browser, the browser tests skip and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from grading.compare import compare_runs, write_comparison
from grading.grades import grade
from grading.html_report import FLIPS_SHOWN, REPORT, job_labels, write_run_report, write_sweep_report
from grading.leaderboard import write_leaderboard
from grading.scoring import format_value, get_scorer, metric_by_name
from grading.slices import slices_schema
from tests.grading.conftest import GOLD_TOOL, SAMPLE_SCHEMA, complete_job, make_samples, write_job, write_run

PETOOLBENCH = get_scorer("petoolbench")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
BUSES = "<Travel>.<Buses>.<Search>"
# A model output that would fetch from the network if it were ever rendered as markup.
HOSTILE = '<script src="https://cdn.example/x.js"></script><img src="http://example.com/a.png">'
REQUIRE_BROWSER = os.environ.get("TOOLSWEEP_REQUIRE_BROWSER") == "1"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class Page(HTMLParser):
    """The tables (by id: header row first), image sources, figure ids and script tags of a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.figures: list[str] = []
        self.scripts = 0
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag == "table":
            self._table = attr.get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attr.get("src") or "")
        elif tag == "figure":
            self.figures.append(attr.get("id") or "")
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def diagnosed(outcomes: dict[str, list[str]]) -> pl.DataFrame:
    """make_samples with the same-function and candidate sets, so every miss gets its outcome."""
    sets = {"same_func_tools": json.dumps([GOLD_TOOL, BUSES]), "candidate_tools": json.dumps([GOLD_TOOL, BUSES])}
    samples = make_samples(outcomes).with_columns(**{k: pl.lit(v) for k, v in sets.items()})
    return grade(samples).select([pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()])


def hand_made_slices() -> pl.DataFrame:
    """Two slice dimensions, pooled and per setting; one band with n < 20."""
    rows = []
    for setting in ("p", "all"):
        for parser in PETOOLBENCH.readings:
            for name, band, n, value in (("history_length", "<=20", 40, 0.5), ("history_length", "21-40", 25, 0.4),
                                         ("history_length", ">70", 3, 0.0), ("gold_position", "1", 30, 0.7)):
                row = {"setting": setting, "parser": parser, "slice": name, "band": band, "n": n, "small": n < 20}
                for metric in PETOOLBENCH.metrics:
                    row[metric.name] = value
                    if metric.ci:
                        row[f"{metric.name}_low"], row[f"{metric.name}_high"] = max(0.0, value - 0.2), value + 0.1
                rows.append(row)
    return pl.DataFrame(rows, schema=slices_schema(PETOOLBENCH), orient="row")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    samples = diagnosed({"p": ["call", "tool", "wrong", "invalid", "failed"], "r": ["call", "params", "wrong"]})
    run = write_run(tmp_path / "run", samples)
    hand_made_slices().write_parquet(run / "slices.parquet")
    return run


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    """Two checkpoints x two history values; a fifth job failed."""
    root = tmp_path / "multirun" / "2026-01-01" / "12-00-00"
    good, poor = make_samples({"p": ["call", "call", "tool"]}), make_samples({"p": ["wrong", "call", "invalid"]})
    for number, (step, history, samples) in enumerate([(500, "none", poor), (500, "full", good),
                                                        (1000, "none", poor), (1000, "full", good)]):
        path = f"/ckpt/run/checkpoint-{step}"
        write_job(root, number, [f"model.path={path}", f"dataset.history={history}", "decoding.constraint=outlines"],
                  samples, complete_job(path))
    write_job(root, 4, ["model.path=/ckpt/run/checkpoint-1500", "dataset.history=none", "decoding.constraint=outlines"],
              None, {"status": "failed", "reason": "CUDA out of memory", "returncode": 1})
    return root


@pytest.fixture
def comparison_dir(tmp_path: Path) -> Path:
    """Run A right on 25 samples; run B wrong on 22 of them, p-0 with an output that is markup."""
    samples_a = make_samples({"p": ["call"] * 25})
    samples_b = make_samples({"p": ["wrong"] * 22 + ["call"] * 3})
    samples_b = grade(samples_b.with_columns(
        output=pl.when(pl.col("sample_id") == "p-0").then(pl.lit(HOSTILE)).otherwise(pl.col("output"))))
    run_a, run_b = write_run(tmp_path / "a", samples_a), write_run(tmp_path / "b", samples_b)
    comparison, flips = compare_runs(samples_a, samples_b)
    paths = write_comparison(comparison, flips, run_b / "compare_vs_a", run_a, run_b)
    assert [p.name for p in paths] == ["comparison.parquet", "flips.parquet", REPORT]
    return paths[-1].parent


def assert_self_contained(html: str, images: bool = True) -> Page:
    page = Page(html)
    assert page.scripts == 0, "no script at all, inline or fetched"
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html), "nothing fetched from a network"
    assert not re.search(r"""<link\b(?![^>]*href="data:)""", html), "no stylesheet or icon file"
    assert bool(page.images) == images and all(src.startswith("data:image/png;base64,") for src in page.images)
    return page


def test_run_report_headline_equals_metrics_parquet(run_dir):
    page = assert_self_contained(write_run_report(run_dir).read_text(encoding="utf-8"))
    header, *rows = page.tables["headline"]
    metrics = pl.read_parquet(run_dir / "metrics.parquet")
    assert len(rows) == metrics.height == 3 * 2, "(p, r, all) x 2 readings"
    shown = [c for c in header if any(m.name == c for m in PETOOLBENCH.metrics)]
    assert shown == ["tool_acc", "param_acc", "call_acc", "format_valid"]
    for cells, expected in zip(rows, metrics.iter_rows(named=True)):
        cell = dict(zip(header, cells))
        assert (cell["setting"], cell["parser"], cell["n"]) == (expected["setting"], expected["parser"], str(expected["n"]))
        for name in shown:
            assert cell[name] == format_value(metric_by_name(PETOOLBENCH, name), expected[name]), (name, expected)
    assert dict(zip(header, rows[0]))["tool_acc"] == "40.0%", "p official: call and tool of 5 samples"


def test_run_report_outcomes_and_slices(run_dir):
    page = Page(write_run_report(run_dir).read_text(encoding="utf-8"))
    header, *rows = page.tables["outcomes"]
    assert header == ["reading", "setting", "n", "correct", "preference_miss", "unparsed", "failed"]
    assert rows[0] == ["official", "p", "5", "2 (40.0%)", "1 (20.0%)", "1 (20.0%)", "1 (20.0%)"]
    assert page.figures == ["figure-outcomes", "figure-slice-history_length", "figure-slice-gold_position"]


def test_run_report_without_slices_or_diagnosis(tmp_path):
    run = write_run(tmp_path / "run", make_samples({"p": ["call", "wrong"]}))
    (run / "slices.parquet").unlink(missing_ok=True)
    samples = pl.read_parquet(run / "samples.parquet")
    samples.drop([c for c in samples.columns if c.endswith("_tool_outcome")]).write_parquet(run / "samples.parquet")
    html = write_run_report(run).read_text(encoding="utf-8")
    assert Page(html).figures == [] and "Slices" not in html and "Why a tool call missed" not in html


def test_run_report_facts_come_from_run_json(run_dir):
    html = write_run_report(run_dir).read_text(encoding="utf-8")
    assert "tiny on petoolbench" in html and "2.5 prompts/s, 50.0 output tokens/s" in html
    facts = {"model": {"name": "given-model"}, "engine": "vllm", "wall_s": {"load": 1.0, "total": 3.25}}
    html = write_run_report(run_dir, facts).read_text(encoding="utf-8")
    assert "given-model on petoolbench" in html and "3.2 s (load 1.0 s)" in html and "prompts/s" not in html
    judged = {**facts, "roles": {"model": {"model": {"name": "given-model"}},
                                 "judge": {"model": {"name": "judge-7b", "path": "/models/judge-7b"},
                                           "engine": "openai", "constraint": "xgrammar"}}}
    html = write_run_report(run_dir, judged).read_text(encoding="utf-8")
    assert "<dt>judge model</dt><dd>judge-7b (/models/judge-7b; engine openai, constraint xgrammar)</dd>" in html, \
        "the judge the scores depend on is named beside the evaluated model"


# (id, overrides per job (a list each), expected labels, reason)
LABEL_CASES = [
    ("replay", [["engine.predictions=/runs/full.jsonl", "engine=replay"],
                ["engine.predictions=/runs/half.jsonl", "engine=replay"]],
     ["engine.predictions=full.jsonl", "engine.predictions=half.jsonl"], "paths shortened to their file name"),
    ("two_keys", [["model.path=/c/checkpoint-5", "dataset.history=none"],
                  ["model.path=/c/checkpoint-9", "dataset.history=none"],
                  ["model.path=/c/checkpoint-9", "dataset.history=full"]],
     ["model.path=checkpoint-5 dataset.history=none", "model.path=checkpoint-9 dataset.history=none",
      "model.path=checkpoint-9 dataset.history=full"], "every key that differs somewhere is kept"),
    ("same_tail", [["model.path=/a/merged"], ["model.path=/b/merged"]], ["model.path=/a/merged", "model.path=/b/merged"],
     "equal file names keep the whole path"),
    ("absent_key", [["dataset.history=none", "decoding.constraint=none"], ["decoding.constraint=none"]],
     ["dataset.history=none", "dataset.history=(default)"], "a job without the key runs the default"),
    ("hydra_prefixes", [["+model.lora='/l/step_3'"], ["+model.lora=/l/step_4"]],
     ["model.lora=step_3", "model.lora=step_4"],
     "Hydra's + prefix and quotes are not part of the name"),
    ("escaped_spaces", [["model.path=/my\\ runs/checkpoint-1", "engine=replay"],
                        ["model.path=/my\\ runs/checkpoint-2", "engine=replay"]],
     ["model.path=checkpoint-1", "model.path=checkpoint-2"], "a space Hydra's sweeper escaped is part of the path"),
    ("spaces_kept", [["model.path='/a b/x'"], ["model.path=/c d/x"]], ["model.path=/a b/x", "model.path=/c d/x"],
     "a value with spaces, quoted or not, is one value"),
    ("one_job", [["model.path=/m/a", "decoding.constraint=none"]], ["model.path=/m/a decoding.constraint=none"],
     "a lone job is named by all its overrides"),
    ("no_overrides", [[]], ["(defaults)"], "a job of the default config"),
]


@pytest.mark.parametrize("overrides,expected", [c[1:3] for c in LABEL_CASES], ids=[c[0] for c in LABEL_CASES])
def test_job_labels(overrides, expected):
    assert job_labels(overrides) == expected


def test_sweep_report(sweep):
    paths = write_leaderboard(sweep)
    assert paths[-1] == sweep / REPORT, "write_leaderboard writes the sweep's report last"
    page = assert_self_contained(paths[-1].read_text(encoding="utf-8"))
    assert page.tables["jobs"][1:] == [
        ["0", "model.path=checkpoint-500 dataset.history=none"], ["1", "model.path=checkpoint-500 dataset.history=full"],
        ["2", "model.path=checkpoint-1000 dataset.history=none"], ["3", "model.path=checkpoint-1000 dataset.history=full"],
        ["4", "model.path=checkpoint-1500 dataset.history=none"]], "decoding.constraint is the same everywhere"
    header, *rows = page.tables["leaderboard"]
    assert header[:2] == ["job", "configuration"] and len(rows) == 4 * 2 * 2 + 1
    first = dict(zip(header, rows[0]))
    board = pl.read_parquet(sweep / "leaderboard.parquet").row(0, named=True)
    assert first["tool_acc"].startswith(format_value(metric_by_name(PETOOLBENCH, "tool_acc"), board["tool_acc"]) + " [")
    assert dict(zip(header, rows[-1]))["reason"] == "CUDA out of memory"
    assert page.figures == ["figure-by_step", "figure-history"]


def test_sweep_report_without_history_or_steps(tmp_path):
    for number, constraint in enumerate(("outlines", "none")):
        write_job(tmp_path, number, [f"decoding.constraint={constraint}"], make_samples({"p": ["call"]}), complete_job(None))
    write_leaderboard(tmp_path)
    page = Page(write_sweep_report(tmp_path).read_text(encoding="utf-8"))
    assert page.figures == [] and [r[1] for r in page.tables["jobs"][1:]] == [
        "decoding.constraint=outlines", "decoding.constraint=none"]


def test_compare_report_shows_the_most_instructive_flips(comparison_dir):
    html = (comparison_dir / REPORT).read_text(encoding="utf-8")
    page = assert_self_contained(html, images=False)
    assert "https://cdn.example" in html and "&lt;script src=" in html, "the output is shown, as text"
    header, *rows = page.tables["flips"]
    assert len(rows) == FLIPS_SHOWN, "25 samples flipped in A vs B; 22 lost, 20 shown"
    assert rows[0][:4] == ["p-0", "p", "lost", "official, json: tool_acc, param_acc, call_acc, format_valid"], \
        "p-0 also lost its format: the most flips"
    assert all(r[2] == "lost" for r in rows), "a lost call (6 flips) outranks a gained parameter (4 flips)"
    assert [r[0] for r in page.tables["comparison"][1:4]] == ["p", "p", "p"]


def _browser_problem() -> tuple[str | None, dict[str, str]]:
    """Why the browser test cannot run here (None when it can), and the paths it would use."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: make install (the test extra pins it)", {}
    chromium = os.environ.get("TOOLSWEEP_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    driver = os.environ.get("TOOLSWEEP_CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and driver):
        return ("no headless browser: install chromium and chromedriver (as root, make install does it with "
                "apt-get: chromium chromium-driver) or name them in TOOLSWEEP_CHROMIUM and TOOLSWEEP_CHROMEDRIVER; "
                f"found browser {chromium}, driver {driver}"), {}
    return None, {"chromium": chromium, "driver": driver}


@pytest.fixture(scope="module")
def browser():
    """A headless chromium through selenium and the system chromedriver (never a download)."""
    problem, paths = _browser_problem()
    if problem and REQUIRE_BROWSER:
        pytest.fail(problem)  # make test ran the install: a browser it lacks is a broken install
    if problem:
        pytest.skip(problem + " (under make test this fails)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths["chromium"]
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=paths["driver"]), options=options)
    yield driver
    driver.quit()


def open_in_browser(driver, page: Path, screenshot: Path) -> dict:
    """Load `page`, take a full-page screenshot, return what the browser saw."""
    driver.get(page.resolve().as_uri())
    seen = driver.execute_script(
        "return {ready: document.readyState, title: document.title,"
        " images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth})),"
        " fetched: performance.getEntriesByType('resource').map(e => e.name),"
        " height: document.documentElement.scrollHeight}")
    driver.set_window_size(1280, min(seen["height"] + 40, 12000))
    assert driver.save_screenshot(str(screenshot))
    seen["errors"] = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return seen


@pytest.mark.parametrize("which", ["run", "sweep", "compare"])
def test_reports_open_in_a_real_browser(browser, which, run_dir, sweep, comparison_dir, tmp_path):
    if which == "run":
        page = write_run_report(run_dir)
    elif which == "sweep":
        page = write_leaderboard(sweep)[-1]
    else:
        page = comparison_dir / REPORT
    shot = tmp_path / f"{which}.png"
    seen = open_in_browser(browser, page, shot)
    assert seen["ready"] == "complete" and seen["title"].endswith("- toolsweep")
    assert seen["errors"] == [], "no console error"
    assert seen["fetched"] == [], "the page fetched nothing (data URIs are not fetches)"
    assert all(i["complete"] and i["width"] > 0 for i in seen["images"]), seen["images"]
    assert len(seen["images"]) == {"run": 3, "sweep": 2, "compare": 0}[which]
    assert shot.read_bytes().startswith(PNG_MAGIC) and shot.stat().st_size > 20_000


def test_an_etapp_run_report_follows_its_scorers_declarations(tmp_path):
    """The /clean rows, no coverage column, no judge failure where nothing was judged, and each
    metric's definition saying which way is better."""
    from tests.grading.conftest import NOT_JUDGED, etapp_case, etapp_table

    cases = [etapp_case(f"tg-{i}", "tool_given/fc", None, None, (3, 2, 2, 0, i), "finish", ["t1"], ["t1"],
                        error=NOT_JUDGED, clean=i > 0) for i in range(3)]
    run = write_run(tmp_path / "run", grade(etapp_table(cases)))
    html = write_run_report(run).read_text(encoding="utf-8")
    header, *rows = Page(html).tables["headline"]
    assert [r[0] for r in rows] == ["tool_given/fc", "tool_given/fc/clean", "all", "all/clean"]
    assert "gold_schema_coverage" not in header and "judge_failed" not in header
    assert "format reminders per episode; lower is better" in html
    assert "model calls per episode; no better direction" in html
