"""marginmine: mine and filter parallel corpora with multilingual sentence embeddings
and margin-based scoring (Artetxe & Schwenk, 2019)."""

__version__ = "0.1.0"
