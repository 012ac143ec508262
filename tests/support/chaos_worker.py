"""A client that loops acquire / heartbeat / release over a few resources until killed.
``CHAOS_WRITER=git``: its writes go through ``git update-ref``, as the CLI's do (else
libgit2, as the library's)."""

from __future__ import annotations

import os
import random
import sys

from gitlease.api.lease import acquire, heartbeat, release
from gitlease.errors import GitleaseError
from gitlease.store.location import open_store


def main() -> None:
    resources = sys.argv[1:]
    store = open_store(one_shot=os.environ.get("CHAOS_WRITER") == "git")
    while True:
        resource = random.choice(resources)
        try:
            acquire(store, resource, ttl="1s", bind=False)
            if random.random() < 0.7:
                heartbeat(store, resource)
            if random.random() < 0.8:
                release(store, resource, checkpoint="step")
        except GitleaseError:
            pass


if __name__ == "__main__":
    main()
