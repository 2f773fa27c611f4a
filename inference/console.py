"""What a run shows on the console: toolsweep's phases with progress bars, the table, errors.

Everything the libraries log (vLLM, torch, transformers, Python warnings) goes to `run.log` in
the run dir through Hydra's file handler; the console shows it only with `verbose=true`.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import sys
from typing import Any, Callable, Iterable


def library_environment() -> None:
    """What the libraries must find in the environment when they are imported, whenever that is
    (a warm worker's later job may be the first to import vLLM, after its environment was reset)."""
    # vLLM otherwise installs its own console handler at import; without it its records reach the
    # root logger, whose handlers Hydra set up (console + run.log).
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")


library_environment()

_STATE: dict[str, Any] = {"quiet": False}


def setup(verbose: bool, quiet: bool) -> None:
    """Route library logs to run.log only (unless verbose); progress bars off when quiet."""
    _STATE["quiet"] = quiet
    if not verbose:
        # torch's C++ warnings (NUMA binding, ...) bypass Python logging; torch reads this at import.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    logging.captureWarnings(True)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.INFO if verbose else logging.ERROR)
    for noisy in ("vllm", "torch", "transformers", "py.warnings", "outlines", "xgrammar", "llguidance"):
        logging.getLogger(noisy).propagate = True
    quiet_transformers()


def route_torch_logs() -> None:
    """torch gives its loggers console handlers of their own at import: send them to the root
    logger (run.log, and the console only with verbose)."""
    for name in list(logging.Logger.manager.loggerDict):
        logger = logging.getLogger(name)
        if name.startswith("torch") and logger.handlers:
            logger.handlers.clear()
            logger.propagate = True


_HF_LOGGING = "transformers.utils.logging"


def quiet_transformers() -> None:
    """transformers logs through its own stderr handler: send its records to the root logger, as
    soon as it is imported, by whom ever (a tokenizer, vLLM). Importing it here would cost every
    run, a replay's or a grading one's included, the seconds of importing torch."""
    if _HF_LOGGING in sys.modules:
        _route_transformers(sys.modules[_HF_LOGGING])
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(_HF_LOGGING, _route_transformers))


def _route_transformers(hf_logging: Any) -> None:
    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once the module `name` has been executed, whoever imports it, then
    leaves the import system."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        execute, then = spec.loader.exec_module, self.then

        def exec_module(module: Any) -> None:
            execute(module)
            then(module)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def progress(items: Iterable[Any], desc: str, total: int | None = None, unit: str = "it") -> Iterable[Any]:
    """A progress bar on stderr with count, rate and ETA (nothing when quiet)."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, disable=_STATE["quiet"],
                mininterval=1.0, dynamic_ncols=True, leave=True)


def bar_factory(names: dict[str, str]):
    """A tqdm constructor for libraries that take one (vLLM's `use_tqdm`): their bars named in
    `names` are shown under toolsweep's label, the others (bookkeeping) are not shown."""
    from tqdm import tqdm

    def make(*args: Any, **kwargs: Any) -> Any:
        label = names.get(kwargs.get("desc", ""))
        hidden = _STATE["quiet"] or label is None
        # A hidden bar still runs, into /dev/null: vLLM divides by a bar's elapsed time, which a
        # disabled tqdm reports as 0 (every batch then failed and was retried one by one).
        kwargs.update(desc=label, file=_devnull() if hidden else sys.stderr, mininterval=1.0, dynamic_ncols=True)
        return tqdm(*args, **kwargs)
    return make


def _devnull() -> Any:
    if "devnull" not in _STATE:
        _STATE["devnull"] = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - kept for the process
    return _STATE["devnull"]


def quiet() -> bool:
    """Whether progress bars are off."""
    return _STATE["quiet"]


def marker(message: str, shown: bool = True) -> None:
    """A phase line on stderr; TOOLSWEEP_PAUSE_AT=<text> sleeps there (fault-injection tests).

    Bookkeeping lines (`shown=False`) go to run.log, and to stderr only under fault injection."""
    import time

    pause = os.environ.get("TOOLSWEEP_PAUSE_AT")
    logging.getLogger("toolsweep").info(message)
    if shown or pause:
        print(f"[toolsweep] {message}", file=sys.stderr, flush=True)
    if pause and pause in message:
        time.sleep(float(os.environ.get("TOOLSWEEP_PAUSE_S", "30")))
