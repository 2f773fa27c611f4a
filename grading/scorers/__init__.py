"""Scorers shipped with toolsweep: one module per scoring scheme, each defining SCORER.

Nothing here lists them: `grading.scoring.get_scorer` finds a module by its name.
"""
