"""Scope patterns (gitlease.scopes.wildmatch): matching agrees with an independent regex
translation and with real ``git ls-files -- ':(glob)PATTERN'``; overlap agrees with brute
force over every valid path up to a length, and every witness matches both patterns."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.errors import UsageError
from gitlease.scopes import wildmatch
from gitlease.scopes.wildmatch import check_path, matches, overlap, validate

ALPHABET = "ab./"
MAX_LEN = 6


def _valid_paths(alphabet: str, max_len: int) -> list[str]:
    out = []
    for n in range(1, max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            path = "".join(chars)
            try:
                check_path(path)
            except UsageError:
                continue
            out.append(path)
    return out


PATHS = _valid_paths(ALPHABET, MAX_LEN)


# ------------------------------------------------------------------ the reference


def reference_regex(pattern: str) -> re.Pattern[str]:
    """An independent translation to a Python regex, written from git's documented rules
    (gitglossary "glob" magic): not from the NFA construction."""
    folder = pattern.endswith("/")
    body = pattern[:-1] if folder else pattern
    segs = body.split("/")
    collapsed: list[str] = []
    for s in segs:
        if s == "**" and collapsed and collapsed[-1] == "**":
            continue
        collapsed.append(s)
    parts: list[str] = []
    for i, seg in enumerate(collapsed):
        first, last = i == 0, i == len(collapsed) - 1
        if seg == "**":
            if first and last:
                parts.append(".*")
            elif first:
                parts.append("(?:.*/)?")
            elif last:
                parts.append("/.*")
            else:
                parts.append("/(?:.*/)?")
            continue
        if not first and collapsed[i - 1] != "**":
            parts.append("/")
        parts.append(_segment_regex(seg))
    rx = "".join(parts)
    if folder and collapsed[-1] != "**":
        rx += "/.*"
    elif not folder and not any(c in pattern for c in "*?[\\"):
        rx += "(?:/.*)?"
    # git compares the text as a literal path first: the path itself, or anything below it
    literal = re.escape(pattern) + (".+" if folder else "(?:/.+)?")
    return re.compile(f"(?:{rx})|(?:{literal})", re.DOTALL)


def _segment_regex(seg: str) -> str:
    out = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "\\":
            out.append(re.escape(seg[i + 1]))
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            neg = seg[j] in "!^"
            if neg:
                j += 1
            items = []
            firstc = True
            while firstc or seg[j] != "]":
                firstc = False
                ch = seg[j]
                if ch == "\\":
                    ch = seg[j + 1]
                    j += 1
                j += 1
                if seg[j] == "-" and seg[j + 1] != "]":
                    hi = seg[j + 1]
                    if hi == "\\":
                        hi = seg[j + 2]
                        j += 1
                    j += 2
                    items.append(f"{re.escape(ch)}-{re.escape(hi)}")
                else:
                    items.append(re.escape(ch))
            i = j + 1
            body = "".join(items)
            out.append(f"(?:(?!/)[^{body}])" if neg else f"(?:(?!/)[{body}])")
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def ref_matches(pattern: str, path: str) -> bool:
    return reference_regex(pattern).fullmatch(path) is not None


# ------------------------------------------------------------------ generated patterns

SEGMENT_ATOMS = st.sampled_from(["a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-b]", "\\a", "[.]"])


@st.composite
def segments(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 5)) == 0:
        return "**"
    seg = "".join(draw(st.lists(SEGMENT_ATOMS, min_size=1, max_size=3)))
    while "**" in seg:  # "**" is a whole segment or nothing
        seg = seg.replace("**", "*")
    if seg in (".", ".."):
        seg = "a" + seg
    return seg


@st.composite
def patterns(draw: st.DrawFn) -> str:
    segs = draw(st.lists(segments(), min_size=1, max_size=3))
    text = "/".join(segs)
    if draw(st.booleans()) and draw(st.booleans()):
        text += "/"
    return text


@settings(max_examples=400, deadline=None)
@given(patterns())
def test_matching_agrees_with_the_reference(pattern: str) -> None:
    validate(pattern)
    rx = reference_regex(pattern)
    for path in PATHS:
        assert matches(pattern, path) == (rx.fullmatch(path) is not None), (pattern, path)


@settings(max_examples=400, deadline=None)
@given(patterns(), patterns())
def test_overlap_is_exact(p: str, q: str) -> None:
    rp, rq = reference_regex(p), reference_regex(q)
    brute = next((x for x in PATHS if rp.fullmatch(x) and rq.fullmatch(x)), None)
    witness = overlap(p, q)
    if brute is not None:
        assert witness is not None, (p, q, brute)
    if witness is not None:
        check_path(witness)  # a path a commit can hold
        assert rp.fullmatch(witness) and rq.fullmatch(witness), (p, q, witness)
        assert matches(p, witness) and matches(q, witness)
        if len(witness) <= MAX_LEN and set(witness) <= set(ALPHABET):
            # the witness is the shortest, so brute force over this length finds one too
            # (when it is spelled in the brute force's alphabet: a literal text such as
            # `[.]` is a path of its own characters)
            assert brute is not None
    assert (overlap(q, p) is None) == (witness is None)


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        ("src/auth/**", "src/auth/login.py", True),
        ("src/auth/**", "src/*/login.py", True),
        ("src/auth/", "src/**", True),
        ("src/*.py", "src/a/b.py", False),
        ("src/*", "src/a/b.py", False),
        ("**/*.md", "docs/*.txt", True),  # the folder named `*.txt`: docs/*.txt/a.md
        ("**/*.md", "docs/x.txt", True),  # docs/x.txt/.md: a literal name covers its folder
        ("**/*.md", "docs/**", True),
        ("docs/auth.md", "docs/auth.md", True),
        ("docs/auth", "docs/auth/x", True),  # a literal name covers a folder of that name
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/c", True),  # a/c/b
        ("a/**/b", "a/*.c", True),  # a/*.c/b, below the folder named `*.c`
        ("src/*.py", "src/*.js", False),
        ("app/[slug]/page.tsx", "app/\\[slug\\]/**", True),  # the folder named `[slug]`
        ("app/[slug]/**", "app/\\[slug\\]/page.tsx", False),  # (as git: `[slug]` a class)
        ("[!a]*", "a*", False),
        ("[a-c]", "[c-e]", True),
        ("[a-c]", "[d-e]", False),
        ("*", "?", True),
        ("\\*", "*", True),
        ("\\*", "a", False),
        ("x/**", "x", True),
        ("x/**", "x?", False),
        ("x/", "x", True),  # the file x... and a folder x: the literal x covers x/...
        ("x/", "x.py", False),
        ("é/*", "[à-ê]/z", True),
    ],
)
def test_overlap_table(p: str, q: str, expected: bool) -> None:
    witness = overlap(p, q)
    assert (witness is not None) == expected, (p, q, witness)
    if witness is not None:
        assert ref_matches(p, witness) and ref_matches(q, witness)


@pytest.mark.parametrize(
    "p, q, witness",
    [
        ("lib/", "lib/x/", "lib/x/a"),  # (not "lib/x/ ", a file named by a space)
        ("**", "a/*/", "a/a/a"),
        ("*", "[!a-z]", "0"),
        ("[ ]", "?", " "),  # a space where nothing else will do
    ],
)
def test_the_witness_is_made_of_readable_characters(p: str, q: str, witness: str) -> None:
    assert overlap(p, q) == witness


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "/abs",
        "a/../b",
        "./a",
        "a/.",
        "a//b",
        "a**",
        "**b",
        "a/***",
        "[ab",
        "[",
        "[]",
        "a\\",
        "x\x01y",
        "x\ny",
        "x\x7f",
        "[[:alpha:]]",
        "[z-a]",
        "[a/b]",
        "/",
        "x" * 1025,
    ],
)
def test_bad_patterns_are_usage(bad: str) -> None:
    with pytest.raises(UsageError):
        validate(bad)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab*?[]!^-\\/.:\x00\n", max_size=10))
def test_validation_is_total(text: str) -> None:
    """Any text at all: a pattern or USAGE, never another exception; a valid one compiles
    and can be matched and overlapped."""
    try:
        validate(text)
    except UsageError:
        return
    for path in PATHS[:50]:
        matches(text, path)
    overlap(text, "**")


# ------------------------------------------------------------------ against git itself

FILES = [
    "q",
    "b.md",
    "a/b",
    "a/b.py",
    "a/x/b",
    "a/x/y/b",
    "a.b/c",
    "ab/a",
    "docs/auth.md",
    "docs/auth/x.md",
    "docs/authx.md",
    "src/auth/login.py",
    "src/auth/deep/token.py",
    "src/main.py",
    "src/a*b",
    "src/ab",
    "x/y.md",
    "z/q/r.md",
    "c",
    "-",
    "]",
    "app/[slug]/page.tsx",
    "app/s/page.tsx",
    "pages/[...slug].tsx",
    "lit/a*b",
    "lit/a\\*b",
]
GIT_PATTERNS = [
    "a",
    "a/",
    "a/*",
    "a/**",
    "a/**/b",
    "**/b",
    "**/*.md",
    "**",
    "*",
    "?",
    "*.md",
    "a/?",
    "[ab]",
    "[!a]",
    "[^a]",
    "[a-c]",
    "[]]",
    "[!]]",
    "[-]",
    "[a-]",
    "src/auth/**",
    "src/auth/",
    "src/*",
    "src/**/*.py",
    "src/a\\*b",
    "src/a[*]b",
    "docs/auth.md",
    "docs/auth",
    "docs/auth*",
    "**/auth/**",
    "*/b",
    "*/*/b",
    "a/**/**/b",
    "**/x/**",
    "z/**/*.md",
    "a.b/*",
    "app/[slug]",
    "app/[slug]/page.tsx",
    "app/[slug]/*",
    "pages/[...slug].tsx",
    "lit/a\\*b",
    "lit/a*b",
]


def test_matching_agrees_with_git_ls_files(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in FILES:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    listed = set(
        subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    ) - {""}
    assert listed == set(FILES)
    for pattern in GIT_PATTERNS:
        out = subprocess.run(
            ["git", "-C", str(repo), "ls-files", "-z", "--", f":(glob){pattern}"],
            capture_output=True,
            check=True,
        ).stdout.decode()
        by_git = set(out.split("\0")) - {""}
        ours = {f for f in FILES if matches(pattern, f)}
        assert ours == by_git, pattern
        assert ours == {f for f in FILES if ref_matches(pattern, f)}, pattern


def test_literal_prefix_is_a_sound_shortcut() -> None:
    """Every match of a pattern starts with its literal prefix (what the index filters on)."""
    for pattern in GIT_PATTERNS:
        compiled = wildmatch.compile_pattern(pattern)
        for f in FILES:
            if compiled.matches(f):
                assert f.startswith(compiled.prefix)
