"""One command: `toolsweep VERB ...`, its help and listing, its error style, and the old commands
as aliases (the installed console scripts, as a user runs them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inference.verbs import VERBS, list_names
from tests.conftest import REPO

BIN = Path(sys.executable).parent


def _toolsweep(*args: str, command: str = "toolsweep") -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / command), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_help_lists_every_verb_and_each_verb_has_its_own_help():
    done = _toolsweep("--help")
    assert done.returncode == 0, done.stderr
    listed = done.stdout.split("Verbs:")[1].split("Groups")[0]
    assert [line.split()[0] for line in listed.strip().splitlines()] == [verb.name for verb in VERBS]
    compare = _toolsweep("compare", "--help")
    assert compare.returncode == 0 and compare.stdout.startswith("usage: toolsweep compare"), compare.stderr


def test_ls_lists_every_name_a_user_can_give(capsys):
    assert list_names([]) == 0
    shown = capsys.readouterr().out
    for kind, names in (("datasets", ("sample", "etapp", "bfcl", "acebench")), ("benchmarks", ("petoolbench",)),
                        ("solvers", ("single_call",)), ("scorers", ("etapp_judge", "bfcl")),
                        ("engines", ("vllm", "replay", "chat")), ("launchers", ("local", "slurm")),
                        ("sweepers", ("race",))):
        block = shown.split(f"{kind} (")[1].split("\n\n")[0]
        for name in names:
            assert f"\n  {name} " in block, (kind, name)
    assert list_names(["engines"]) == 0 and "datasets" not in capsys.readouterr().out


def test_a_verbs_error_is_said_in_one_style_and_exits_2(tmp_path):
    done = _toolsweep("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert done.returncode == 2 and done.stderr.startswith("toolsweep compare: error: "), done.stderr
    assert "holds no samples.parquet" in done.stderr
    unknown = _toolsweep("ls", "nothing")
    assert unknown.returncode == 2 and "toolsweep ls: error: argument kind: invalid choice" in unknown.stderr


@pytest.mark.parametrize("verb", ["checkpoints", "compare"])
def test_an_old_command_still_runs_its_verb_and_says_it_is_an_alias(tmp_path, verb):
    (tmp_path / "checkpoint-20").mkdir()
    (tmp_path / "checkpoint-20" / "config.json").write_text("{}")
    args = [str(tmp_path)] if verb == "checkpoints" else [str(tmp_path / "a"), str(tmp_path / "b")]
    old, new = _toolsweep(*args, command=f"toolsweep-{verb}"), _toolsweep(verb, *args)
    assert f"toolsweep-{verb} is an alias of `toolsweep {verb}`" in old.stderr
    assert (old.returncode, old.stdout) == (new.returncode, new.stdout)
    if verb == "checkpoints":
        assert old.stdout.strip() == str((tmp_path / "checkpoint-20").resolve())
    else:
        assert f"toolsweep-{verb}: error: " in old.stderr and old.returncode == 2


def test_run_is_the_default_verb():
    """`toolsweep run ...` composes as a bare `toolsweep ...` does (Hydra's --cfg: no run)."""
    bare, verb = _toolsweep("--cfg", "job", "dataset.limit=3"), _toolsweep("run", "--cfg", "job", "dataset.limit=3")
    assert bare.returncode == 0 and verb.returncode == 0, verb.stderr
    assert verb.stdout == bare.stdout and "limit: 3" in verb.stdout
