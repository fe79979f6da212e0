"""The ``marginmine`` command line: :mod:`.main` (the parser, data / preprocessing / encoder
commands) with one module per further stage group (:mod:`.score`, :mod:`.nmt`, :mod:`.report`) and
the input/output roles of every command (:mod:`.paths`, checked before any work: no command writes
over its own input)."""

from marginmine.cli.main import main

__all__ = ["main"]
