"""kag: Knowledge-Augmented Generation benchmarking and grading toolkit."""

__version__ = "0.1.0"
