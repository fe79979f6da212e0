"""The floor below the encoders and the scorers: k-nearest-neighbour search over unit embeddings
(:mod:`.knn`: exact and approximate FAISS indexes, the index choice, block-wise search that can
resume) and the margin maths over its neighbour lists (:mod:`.margin`: Artetxe & Schwenk 2019).

Both stages import from here and never from each other for it: ``encoders`` (hard negatives,
intrinsic retrieval) and ``scoring`` (filtering, mining, the benchmarks). This package imports
nothing of marginmine but ``defaults``, ``errors`` and ``io``.
"""
