"""IRT2 linking and ranking scores, equal to the reference evaluator (PyPI ``irt2``).

Modules, in pipeline order:

- ``dataset``: the dataset folder -> ``GroundTruth`` per side (queries with gold sets)
- ``predictions``: prediction files (CSV / JSON Lines, gzip) -> ``RowBlock``s
- ``ranking``: rows + ground truth -> per-target records (raw and filtered ranks)
- ``metrics``: per-target RR and hits@k, exact micro and macro means
- ``evaluate``: the whole pipeline -> ``Evaluation``
- ``render``: text / JSON report and the per-query JSON lines
"""
