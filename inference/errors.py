"""The few exception types toolsweep raises on purpose; each message says what, the value, and the fix."""


class ToolsweepError(Exception):
    """Base class: an error the user can fix, reported without a traceback by the CLI."""


class ConfigError(ToolsweepError):
    """The configuration is invalid (every problem listed at once)."""


class DatasetError(ToolsweepError):
    """The benchmark files are missing or hold bad records (every bad record listed)."""


class EngineError(ToolsweepError):
    """The inference engine could not start or run."""
