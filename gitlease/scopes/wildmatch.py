"""Path scope patterns as automata: matching a path, and deciding overlap exactly.

A pattern's text follows git's wildmatch rules (:mod:`gitlease.scopes.syntax` reads it and
refuses a bad one, USAGE; docs/reference/path-scopes.md). Each pattern becomes a small NFA
whose transitions test one character. Two patterns overlap when the intersection of their
languages, and of the language of valid paths (non-empty segments, none ``.`` or ``..``), is
not empty: decided by a breadth-first search of the product automaton over an alphabet of
character classes (every character the patterns name, every range boundary, and "any other
character"), which also gives the shortest witness path. The valid-path automaton also
checks a path a person gives (relative, ``/``-separated, no empty, ``.`` or ``..`` segment).
Standard library only: the commit hook imports this module.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

from ..errors import UsageError
from .syntax import CONTROL, Token, literal_prefix, prefix_of, tokenize
from .syntax import MAX_PATTERN_CHARS as MAX_PATTERN_CHARS  # (the scope index reads it here)

MAX_PATTERNS = 64

# A character test: (negated, ((lo, hi), ...)) as code points; "/" never passes a test
# made from *, ? or a class.
Ranges = tuple[tuple[int, int], ...]
_SLASH = ord("/")


class _Test:
    """One character test of an NFA transition: a set of ranges (or its complement), and
    whether ``/`` may pass."""

    __slots__ = ("ranges", "negated", "slash")

    def __init__(self, ranges: Ranges, *, negated: bool, slash: bool) -> None:
        self.ranges = ranges
        self.negated = negated
        self.slash = slash

    def __call__(self, code: int) -> bool:
        if code == _SLASH:
            if not self.slash:
                return False
            if self.negated and not self.ranges:
                return True
        inside = any(lo <= code <= hi for lo, hi in self.ranges)
        return inside != self.negated


def _literal(char: str) -> _Test:
    code = ord(char)
    return _Test(((code, code),), negated=False, slash=char == "/")


_ANY_IN_SEGMENT = _Test((), negated=True, slash=False)
_ANY = _Test((), negated=True, slash=True)


class Pattern:
    """A validated scope pattern compiled to an NFA (states 0..n-1; ``start``; ``accept``).

    ``edges[s]``: (test, target) pairs; ``eps[s]``: epsilon targets.
    """

    __slots__ = ("text", "edges", "eps", "start", "accept", "prefix")

    def __init__(self, text: str) -> None:
        self.text = text
        self.edges: list[list[tuple[_Test, int]]] = []
        self.eps: list[list[int]] = []
        self.start = self._state()
        self.prefix = literal_prefix(text)
        end = _compile(self, tokenize(text), self.start)
        if any(c in text for c in "*?[\\"):
            # git compares a pathspec's text as a literal path before it tries it as a glob:
            # `app/[slug]` covers the folder named `[slug]` (and everything below it) as well
            # as `app/s`. The union: a second branch spelling the text, joined at the end.
            folder = text.endswith("/")
            literal: list[Token] = [("lit", c) for c in text]
            literal.append(("all",) if folder else ("below-or-self",))
            branch = self._state()
            self.eps[self.start].append(branch)
            spelled = _compile(self, literal, branch)
            joined = self._state()
            self.eps[end].append(joined)
            self.eps[spelled].append(joined)
            end = joined
        self.accept = end

    def _state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        """Every state reachable from ``states`` by epsilon moves."""
        seen = set(states)
        todo = list(seen)
        while todo:
            for nxt in self.eps[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)

    def step(self, states: frozenset[int], code: int) -> frozenset[int]:
        """The states after reading the character ``code`` from ``states``."""
        moved = {t for s in states for test, t in self.edges[s] if test(code)}
        return self.closure(moved) if moved else frozenset()

    def matches(self, path: str) -> bool:
        """Whether the path (relative to the repository top, ``/``-separated) is covered."""
        if not path.startswith(self.prefix):
            return False
        states = self.closure((self.start,))
        for char in path:
            states = self.step(states, ord(char))
            if not states:
                return False
        return self.accept in states

    def tests(self) -> list[_Test]:
        """Every character test of the NFA (to build an alphabet from)."""
        return [test for edges in self.edges for test, _ in edges]

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"


def validate(text: object) -> str:
    """``text`` if it is a valid scope pattern; USAGE naming what is wrong otherwise."""
    tokenize(text)
    return text  # type: ignore[return-value]  # (_tokens checked that it is a str)


@lru_cache(maxsize=4096)
def compile_pattern(text: str) -> Pattern:
    """The compiled pattern (USAGE if it is not valid); cached per process."""
    if not isinstance(text, str):
        raise UsageError(f"a path scope must be text, not {type(text).__name__}")
    return Pattern(text)


# ------------------------------------------------------------------ NFA construction


def _compile(nfa: Pattern, tokens: Sequence[Token], start: int) -> int:
    """Thompson construction of ``tokens`` from ``start``; the accepting state."""
    cur = start

    def edge(src: int, test: _Test) -> int:
        dst = nfa._state()
        nfa.edges[src].append((test, dst))
        return dst

    def any_star(src: int) -> int:
        """``src`` with a loop of any character (slash too) through a fresh state."""
        loop = nfa._state()
        nfa.eps[src].append(loop)
        nfa.edges[loop].append((_ANY, loop))
        return loop

    slash = _literal("/")
    for token in tokens:
        kind = token[0]
        if kind == "lit":
            cur = edge(cur, _literal(str(token[1])))
        elif kind == "any":
            cur = edge(cur, _ANY_IN_SEGMENT)
        elif kind == "class":
            ranges = token[2]
            assert isinstance(ranges, tuple)
            cur = edge(cur, _Test(ranges, negated=bool(token[1]), slash=False))
        elif kind == "star":
            loop = nfa._state()
            nfa.eps[cur].append(loop)
            nfa.edges[loop].append((_ANY_IN_SEGMENT, loop))
            cur = loop
        elif kind == "all":
            cur = any_star(cur)
        elif kind == "dstar-lead":  # (.*/)?
            out = nfa._state()
            nfa.eps[cur].append(out)
            loop = any_star(cur)
            nfa.edges[loop].append((slash, out))
            cur = out
        elif kind == "dstar-mid":  # / or /.*/
            after = edge(cur, slash)
            out = nfa._state()
            nfa.eps[after].append(out)
            loop = any_star(after)
            nfa.edges[loop].append((slash, out))
            cur = out
        elif kind == "dstar-end" or kind == "below":  # /.*
            cur = any_star(edge(cur, slash))
        elif kind == "below-or-self":  # (/.*)?
            out = nfa._state()
            nfa.eps[cur].append(out)
            loop = any_star(edge(cur, slash))
            nfa.eps[loop].append(out)
            cur = out
        else:  # pragma: no cover
            raise AssertionError(kind)
    return cur


# ------------------------------------------------------------------ valid paths

# A DFA of valid paths: segments non-empty and never "." or "..". States: 0 a segment's
# start, 1 after ".", 2 after "..", 3 inside a proper segment; -1 dead. Accepting: 3.
_DOT = ord(".")


def _valid_step(state: int, code: int) -> int:
    if code == _SLASH:
        return 0 if state == 3 else -1
    if code == _DOT and state in (0, 1):
        return state + 1
    return 3


def is_repository_path(path: str) -> bool:
    """Whether ``path`` has the shape of a file path in a repository (relative, no empty,
    ``.`` or ``..`` segment); control characters allowed, as git allows them."""
    state = 0
    for char in path:
        state = _valid_step(state, ord(char))
        if state < 0:
            return False
    return state == 3


def check_path(path: object) -> str:
    """``path`` if it is a path a scope can cover (relative, ``/``-separated, no empty, ``.``
    or ``..`` segment, no control character); USAGE otherwise."""
    if not isinstance(path, str) or not path:
        raise UsageError("a path must be non-empty text")
    if CONTROL.search(path):
        raise UsageError(f"the path {CONTROL.sub('?', path)[:80]!r} holds a control character")
    state = 0
    for char in path:
        state = _valid_step(state, ord(char))
        if state < 0:
            break
    if state != 3:
        raise UsageError(
            f"the path {path[:80]!r} is not relative to the repository's top folder "
            "(no leading or doubled '/', no '.' or '..' segment)"
        )
    return path


# ------------------------------------------------------------------ overlap


def _alphabet(tests: Iterable[_Test]) -> list[int]:
    """One representative character for each class of characters that every test treats
    alike: the boundaries of every range cut the code points into intervals."""
    cuts = {0x20, _SLASH, _SLASH + 1, _DOT, _DOT + 1, 0x110000}
    for test in tests:
        for lo, hi in test.ranges:
            cuts.add(lo)
            cuts.add(hi + 1)
    points = sorted(c for c in cuts if 0x20 <= c <= 0x110000)
    reps = []
    for lo, nxt in pairwise(points):
        rep = _usable(lo, nxt)
        if rep is not None:
            reps.append(rep)
    # readable characters first: the search finds the shortest witness either way, and of
    # those the one a person reads (``lib/x/a``, not ``lib/x/ `` with a trailing space)
    return sorted(reps, key=_readability)


#: The characters a witness is made of where its class allows, best first.
_READABLE = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_-"


def _readability(code: int) -> tuple[int, int]:
    at = _READABLE.find(chr(code))
    if at >= 0:
        return 0, at
    return (1 if 0x20 < code < 0x7F else 2 if code != 0x20 else 3), code


def _usable(lo: int, end: int) -> int | None:
    """A character in ``[lo, end)`` a path can hold (not a control character or surrogate),
    the most readable one there."""
    for ch in _READABLE:
        if lo <= ord(ch) < end:
            return ord(ch)
    for start, stop in ((0x21, 0x7F), (0xA0, 0xD800), (0xE000, 0x110000), (0x20, 0x21)):
        first = max(lo, start)
        if first < min(end, stop):
            return first
    return None


def overlap(a: str | Pattern, b: str | Pattern) -> str | None:
    """A path matched by both patterns (the shortest, a witness), or None if no path is.

    Exact: a breadth-first search over the product of both NFAs and the valid-path DFA.
    """
    pa = a.prefix if isinstance(a, Pattern) else prefix_of(a)
    pb = b.prefix if isinstance(b, Pattern) else prefix_of(b)
    if not (pa.startswith(pb) or pb.startswith(pa)):
        return None  # every match starts with its literal prefix (and nothing is compiled)
    p = a if isinstance(a, Pattern) else compile_pattern(a)
    q = b if isinstance(b, Pattern) else compile_pattern(b)
    alphabet = _alphabet([*p.tests(), *q.tests()])
    start = (p.closure((p.start,)), q.closure((q.start,)), 0)
    parent: dict[tuple[frozenset[int], frozenset[int], int], tuple[object, int] | None] = {
        start: None
    }
    todo = deque([start])
    while todo:
        node = todo.popleft()
        ps, qs, v = node
        if v == 3 and p.accept in ps and q.accept in qs:
            return _witness(parent, node)
        for code in alphabet:
            nv = _valid_step(v, code)
            if nv < 0:
                continue
            nps = p.step(ps, code)
            if not nps:
                continue
            nqs = q.step(qs, code)
            if not nqs:
                continue
            nxt = (nps, nqs, nv)
            if nxt not in parent:
                parent[nxt] = (node, code)
                todo.append(nxt)
    return None


def _witness(parent: dict[tuple[frozenset[int], frozenset[int], int], tuple[object, int] | None],
             node: tuple[frozenset[int], frozenset[int], int]) -> str:  # fmt: skip
    chars: list[str] = []
    link = parent[node]
    while link is not None:
        prev, code = link
        chars.append(chr(code))
        link = parent[prev]  # type: ignore[index]
    return "".join(reversed(chars))


def matches(pattern: str | Pattern, path: str) -> bool:
    """Whether ``pattern`` covers ``path`` (a valid pattern; USAGE otherwise)."""
    p = pattern if isinstance(pattern, Pattern) else compile_pattern(pattern)
    return p.matches(path)


def check_patterns(patterns: object) -> tuple[str, ...] | None:
    """The scope patterns of a request, validated and with repeats dropped, or None for none."""
    if patterns is None:
        return None
    if isinstance(patterns, str) or not isinstance(patterns, Iterable):
        raise UsageError("paths must be a list of patterns")
    out = tuple(dict.fromkeys(validate(p) for p in patterns))
    if not out:
        return None
    if len(out) > MAX_PATTERNS:
        raise UsageError(f"at most {MAX_PATTERNS} path scopes on one claim")
    return out


def overlaps(
    mine: Sequence[str], theirs: Sequence[str]
) -> list[tuple[str, str, str]]:  # (my pattern, their pattern, witness)
    """Every overlapping pair of two scope lists, each with a witness path."""
    out = []
    for m in mine:
        for t in theirs:
            witness = overlap(m, t)
            if witness is not None:
                out.append((m, t, witness))
    return out
