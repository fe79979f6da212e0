"""The preprocessing stage (rules/preprocess.smk): sharding with global exact dedup (:mod:`.shard`,
:mod:`.dedup`), the per-pair filters (:mod:`.filters`, :mod:`.langid`, :mod:`.tokens`,
:mod:`.normalize`) run by :mod:`.pipeline`, the ledger of every removal (:mod:`.ledger`) and the
test-set leakage check (:mod:`.leakage`)."""
