"""`python -m aclnn`: the command line (see `aclnn --help`)."""

import sys

from .user.cli import main

sys.exit(main())
