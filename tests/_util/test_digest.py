"""The digests the commit check computes without OpenSSL (_util/digest.py) are hashlib's:
a record's object id, a guard's file name and a store's name must not change with the
module that computes them."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from gitlease._util import digest


@given(st.binary(max_size=4096), st.binary(max_size=64))
def test_the_same_digests_as_hashlib(first: bytes, more: bytes) -> None:
    for ours, theirs in ((digest.sha1, hashlib.sha1), (digest.sha256, hashlib.sha256)):
        mine, reference = ours(first), theirs(first)
        assert mine.hexdigest() == reference.hexdigest()
        mine.update(more)
        reference.update(more)
        assert mine.digest() == reference.digest()


def test_they_do_not_load_hashlib() -> None:
    probe = "import sys, gitlease._util.digest as d; d.sha1(b''); print('hashlib' in sys.modules)"
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "False"


def test_a_process_that_hashes_many_turns_to_hashlib() -> None:
    probe = (
        "import sys, hashlib as h; del sys.modules['hashlib']\n"  # (pytest's may be loaded)
        "import gitlease._util.digest as d\n"
        "first = [d.sha1(b'%d' % i).hexdigest() for i in range(d.SWITCH_AFTER)]\n"
        "print('hashlib' in sys.modules)\n"
        "after = d.sha1(b'x').hexdigest()\n"
        "print('hashlib' in sys.modules, after == h.sha1(b'x').hexdigest())\n"
        "print(first == [h.sha1(b'%d' % i).hexdigest() for i in range(d.SWITCH_AFTER)])\n"
    )
    got = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert got.stdout.split("\n")[:3] == ["False", "True True", "True"], got.stdout
