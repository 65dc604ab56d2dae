"""IRT2 linking and ranking scores, equal to the reference evaluator (PyPI ``irt2``).

Modules, in pipeline order (the same roles as `kag.grading.triplets`):

- ``io``: ``io.dataset`` reads the dataset folder -> ``GroundTruth`` per side (queries with
  gold sets); ``io.predictions`` reads prediction files (CSV / JSON Lines, gzip) -> ``RowBlock``s
- ``ranking``: rows + ground truth -> per-target records (raw and filtered ranks)
- ``metrics``: per-target RR and hits@k, exact micro and macro means
- ``score``: the whole pipeline -> ``Evaluation``
- ``model``: the values passed between them

The text / JSON report and the per-query JSON lines are rendered outside this package.
"""
