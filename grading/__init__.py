"""toolsweep grading: model outputs -> grades -> metrics -> Parquet and Markdown reports.

This package never imports `inference`, vllm or torch, so a finished run can be
re-graded on any machine with Polars and PyArrow.
"""
