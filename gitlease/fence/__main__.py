"""``python -m gitlease.fence HOOK [ARGS]``: the fencing hooks' stable entry point (installed
hooks call it); the hook itself is :mod:`gitlease.fence.hook`."""

import sys

from .hook import main

sys.exit(main())
