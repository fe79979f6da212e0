"""The NMT stage (rules/nmt.smk): training on a selection (:mod:`.train`), decoding and BLEU
(:mod:`.evaluate`, with :mod:`.ctdecode` for CTranslate2), and the seed-aware comparison of
methods (:mod:`.comparison`, :mod:`.significance`)."""
