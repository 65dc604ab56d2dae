"""Grading predicted knowledge-graph triplets against gold (`kag triplets`).

Modules, in pipeline order: `io` (files, raw model text), `validate` (validate_schema),
`normalize`, `similarity` (exact / fuzzy / embedding), `assign` (the assignment solver),
`score` (per entry, per run, `grade_triplets`), `report` (JSON, text rows, details);
`model` holds the values passed between them.
"""
