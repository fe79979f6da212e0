"""The data stage (rules/data.smk): downloads (:mod:`.download`, :mod:`.archive`), seeded test-set
slices (:mod:`.heldout`) and the demo's noisy corpus with its clean-mix dev/test
(:mod:`.democorpus`, :mod:`.cleanmix`)."""
