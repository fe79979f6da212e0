"""The ``marginmine`` command line: :mod:`.main` (the parser, built from one table of the modules
that define subcommands, :data:`.main.COMMAND_MODULES`, and the one-line errors) with one module per
group of commands (:mod:`.preprocess`, :mod:`.data`, :mod:`.encoders`, :mod:`.score`, :mod:`.nmt`,
:mod:`.report`, ...), the options several of them share (:mod:`.options`) and the input/output roles
of every command (:mod:`.paths`, checked before any work: no command writes over its own input)."""

from marginmine.cli.main import main

__all__ = ["main"]
