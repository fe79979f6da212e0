"""``python -m marginmine.cli ...``: the same as the ``marginmine`` command."""

import sys

from marginmine.cli.main import main

sys.exit(main())
