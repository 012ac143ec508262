"""A client that loops acquire / heartbeat / release over a few resources until killed."""

from __future__ import annotations

import random
import sys

from gitlease.api.lease import acquire, heartbeat, release
from gitlease.errors import GitleaseError
from gitlease.store.location import open_store


def main() -> None:
    resources = sys.argv[1:]
    store = open_store()
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
