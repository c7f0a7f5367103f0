"""``python -m runtime.cli``: the same as the ``foldline`` command."""

import sys

from runtime.cli.main import main

sys.exit(main())
