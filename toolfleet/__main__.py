"""`python -m toolfleet`: the `toolfleet` command."""

import sys

from toolfleet.orchestrator.cli.main import main

sys.exit(main())
