"""Reading IRT2 input: ``files`` (whole-line blocks, plain or gzip), ``dataset`` (the dataset
folder -> ``GroundTruth`` per side) and ``predictions`` (prediction files -> ``RowBlock``s)."""
