"""Grading: MCQ, search, comparisons, triplets, IRT2, judge, extraction."""
