"""toolsweep inference: benchmark data in, model outputs out (adapters, prompts, schemas, engines, CLI)."""
