"""Providers (docs/reference/providers.md): every spelling of one unit of work gives one
resource, distinct units give distinct resources, and bad references are usage errors that say
what is accepted."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitlease.errors import GitleaseError, UsageError
from gitlease.providers import canonical_key, get_provider, provider_names, reset_plugins

BUILTIN_NAMES = ["beads", "github", "gitlab", "jira", "linear", "path", "raw", "taskmaster"]

# provider -> (resource, equivalent spellings)
EQUIVALENT = {
    "github": (
        "github/acme/api/42",
        [
            "acme/api#42",
            "Acme/API#42",
            "acme/api#042",
            "github.com/acme/api/issues/42",
            "https://github.com/acme/api/issues/42",
            "https://github.com/acme/api/issues/42/",
            "https://github.com/acme/api/issues/42#issuecomment-123456",
            "https://github.com/acme/api/issues/42?notification_referrer_id=x",
            "https://github.com/acme/api/pull/42",
            "https://github.com/acme/api/pull/42/files",
            "https://github.com/acme/api/pulls/42",
            "http://github.com/acme/api/issues/42",
            "https://www.github.com/acme/api/issues/42",
            "HTTPS://GitHub.com/ACME/Api/issues/42",
            "https://api.github.com/repos/acme/api/issues/42",
            "https://api.github.com/repos/acme/api/pulls/42",
            "github/acme/api/42",
        ],
    ),
    "gitlab": (
        "gitlab/group/sub/proj/issues/7",
        [
            "group/sub/proj#7",
            "Group/Sub/Proj#007",
            "https://gitlab.com/group/sub/proj/-/issues/7",
            "https://gitlab.com/group/sub/proj/-/issues/7/",
            "https://gitlab.com/group/sub/proj/-/issues/7#note_99",
            "https://gitlab.com/group/sub/proj/-/work_items/7",
            "gitlab.com/group/sub/proj/-/issues/7",
            "https://gitlab.example.org:8443/group/sub/proj/-/issues/7",
            "gitlab/group/sub/proj/issues/7",
        ],
    ),
    "jira": (
        "jira/ABC-12",
        [
            "ABC-12",
            "abc-12",
            "Abc-012",
            "https://x.atlassian.net/browse/ABC-12",
            "https://x.atlassian.net/browse/abc-12/",
            "x.atlassian.net/browse/ABC-12",
            "https://jira.example.com/jira/browse/ABC-12?focusedCommentId=1",
            "https://x.atlassian.net/jira/software/projects/ABC/boards/1?selectedIssue=ABC-12",
            "jira/ABC-12",
        ],
    ),
    "linear": (
        "linear/ENG-42",
        [
            "ENG-42",
            "eng-42",
            "https://linear.app/acme/issue/ENG-42",
            "https://linear.app/acme/issue/ENG-42/some-title-slug",
            "https://linear.app/acme/issue/eng-42/another-title/",
            "linear.app/acme/issue/ENG-42",
            "linear/ENG-42",
        ],
    ),
    "beads": ("beads/bd-a1b2", ["bd-a1b2", "BD-A1B2", "Bd-A1b2", "beads/bd-a1b2"]),
    "taskmaster": ("taskmaster/master/3.2", ["3.2", "03.02", "taskmaster/master/3.2"]),
    "raw": ("some/thing with spaces", ["some/thing with spaces", "  some/thing with spaces\n"]),
}

DISTINCT = {
    "github": [
        "acme/api#42",
        "acme/api#43",
        "acme/api#4",
        "acme/api#420",
        "acme/apis#42",
        "acme2/api#42",
        "api/acme#42",
        "acme/api.js#42",
        "acme-/api#42",
    ],
    "gitlab": [
        "group/sub/proj#7",
        "group/sub/proj!7",
        "group/sub/proj#8",
        "group/proj#7",
        "group/sub/sub/proj#7",
        "group/sub/proj2#7",
        "group/sub/issues#7",
    ],
    "jira": ["ABC-12", "ABC-13", "ABC-120", "ABD-12", "AB-12", "ABC1-12", "ABC_X-12"],
    "linear": ["ENG-42", "ENG-43", "ENG-4", "EN-42", "ENGX-42", "E1-42"],
    "beads": ["bd-a1b2", "bd-a1b3", "bd-a1b2.1", "bd-a1b2.2", "bd-a1b2.1.1", "bx-a1b2", "bd-a1b"],
    "taskmaster": ["3", "3.2", "32", "3.20", "3.2.1", "4"],
}

MALFORMED = {
    "github": [
        "acme/api",
        "acme/api#",
        "acme/api#0",
        "acme/api#-1",
        "acme/api#4x",
        "acme/api#1" + "0" * 18,
        "acme/api#١٢",
        "acme#42",
        "#42",
        "/api#42",
        "acme/#42",
        "-acme/api#42",
        "a" * 40 + "/api#42",
        "acme/" + "r" * 101 + "#42",
        "acme/..#42",
        "acme/api.git#42",
        "acme/a b#42",
        "acme_x/api#42",
        "acme/api#42#43",
        "https://github.com/acme/api",
        "https://github.com/acme/api#42",
        "https://github.com/acme/api/commit/42",
        "https://github.com/acme/api/issues/",
        "https://github.com/acme/api/issues/abc",
        "https://gitlab.com/acme/api/issues/42",
        "https://github.com.evil.example/acme/api/issues/42",
        "ftp://github.com/acme/api/issues/42",
        "github/acme/42",
        "42",
    ],
    "gitlab": [
        "proj#7",
        "group/proj",
        "group/proj#",
        "group/proj#0",
        "group/proj&7",
        "group//proj#7",
        "group/-proj#7",
        "group/proj.git#7",
        "group/pr oj#7",
        "https://gitlab.com/group/proj/issues/7",
        "https://gitlab.com/group/proj/-/commits/7",
        "https://gitlab.com/group/proj/-/issues",
        "https://gitlab.com/proj/-/issues/7",
        "gitlab/group/proj/7",
        "7",
    ],
    "jira": [
        "ABC",
        "ABC-",
        "-12",
        "A-12",
        "1BC-12",
        "ABC-0",
        "ABC 12",
        "ABC-12-3",
        "https://x.atlassian.net/projects/ABC",
        "https://x.atlassian.net/browse/ABC",
        "ftp://x.atlassian.net/browse/ABC-12",
        "jira/",
    ],
    "linear": [
        "ENG",
        "ENG-",
        "42",
        "ENG-0",
        "ENG_X-1",
        "https://linear.app/acme/project/ENG-42",
        "https://example.com/acme/issue/ENG-42",
        "https://linear.app/acme/issue/ENG",
    ],
    "beads": [
        "bd",
        "bd-",
        "-a1b2",
        "bd--a1b2",
        "bd-a1b2.",
        "bd-a1b2.0",
        "bd-a1b2.01",
        "bd-a1b2..1",
        "bd/a1b2",
        "bd-a1b2 x",
        "bd-ä1b2",
        "beads/",
    ],
    "taskmaster": ["0", "3.0", "3.", ".3", "3..2", "a", "-3", "3 2", "taskmaster/3", "٣"],
    "raw": ["a\x00b", "a\x7fb", "x\u0085y", "é" * 300],
}


@pytest.mark.parametrize("provider", sorted(EQUIVALENT))
def test_equivalent_spellings_give_one_resource(provider: str) -> None:
    resource, spellings = EQUIVALENT[provider]
    for spelling in spellings:
        assert canonical_key(provider, spelling) == resource, spelling


@pytest.mark.parametrize("provider", sorted(EQUIVALENT))
def test_keys_are_idempotent(provider: str) -> None:
    resource, _ = EQUIVALENT[provider]
    assert canonical_key(provider, resource) == resource


@pytest.mark.parametrize("provider", sorted(DISTINCT))
def test_distinct_units_give_distinct_resources(provider: str) -> None:
    resources = [canonical_key(provider, item) for item in DISTINCT[provider]]
    assert len(set(resources)) == len(resources), resources


def test_gitlab_separates_issues_from_merge_requests() -> None:
    assert canonical_key("gitlab", "g/p#7") == "gitlab/g/p/issues/7"
    assert canonical_key("gitlab", "g/p!7") == "gitlab/g/p/merge_requests/7"
    url = "https://gitlab.com/g/p/-/merge_requests/7/diffs"
    assert canonical_key("gitlab", url) == "gitlab/g/p/merge_requests/7"


def test_owners_named_like_the_provider_are_plain_owners() -> None:
    assert canonical_key("github", "github/docs#1") == "github/github/docs/1"
    assert canonical_key("gitlab", "gitlab/p#1") == "gitlab/gitlab/p/issues/1"


def test_taskmaster_tag_is_part_of_the_resource() -> None:
    assert canonical_key("taskmaster", "3") == "taskmaster/master/3"
    assert canonical_key("taskmaster", "3.2", options={"tag": "feat-x"}) == "taskmaster/feat-x/3.2"
    assert canonical_key("taskmaster", "taskmaster/feat/3") == "taskmaster/feat/3"
    for tag in ["", "a b", "a/b", "tab\there"]:
        with pytest.raises(UsageError):
            canonical_key("taskmaster", "3", options={"tag": tag})
    with pytest.raises(UsageError, match="tag"):
        canonical_key("taskmaster", "taskmaster/feat/3", options={"tag": "other"})


@pytest.mark.parametrize(
    ("provider", "item"), [(p, item) for p, items in MALFORMED.items() for item in items]
)
def test_malformed_references_are_usage_errors(provider: str, item: str) -> None:
    with pytest.raises(UsageError) as caught:
        canonical_key(provider, item)
    assert caught.value.exit_code == 2
    assert get_provider(provider).accepts in str(caught.value)


@pytest.mark.parametrize("provider", BUILTIN_NAMES)
@pytest.mark.parametrize("item", ["", "   ", "\n\t"])
def test_empty_references_are_usage_errors(provider: str, item: str) -> None:
    with pytest.raises(UsageError, match="empty") as caught:
        canonical_key(provider, item)
    assert get_provider(provider).accepts in str(caught.value)


def test_unknown_options_are_refused() -> None:
    with pytest.raises(UsageError, match="tag") as caught:
        canonical_key("github", "acme/api#1", options={"tag": "x"})
    assert caught.value.exit_code == 2


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        get_provider("nope")
    assert caught.value.exit_code == 2
    for name in BUILTIN_NAMES:
        assert name in str(caught.value)


def test_builtins_are_listed_sorted() -> None:
    names = provider_names()
    assert names == sorted(names)
    assert set(BUILTIN_NAMES) <= set(names)
    for name in BUILTIN_NAMES:
        provider = get_provider(name)
        assert provider.name == name
        assert provider.accepts


# --- GitHub properties ----------------------------------------------------------------------

owners = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}", fullmatch=True)
repos = st.from_regex(r"[A-Za-z0-9._-]{1,100}", fullmatch=True).filter(
    lambda r: r not in (".", "..") and not r.lower().endswith(".git")
)
numbers = st.integers(min_value=1, max_value=10**18 - 1)
triples = st.tuples(owners, repos, numbers)


@given(triples, triples)
def test_github_distinct_triples_never_collide(a: tuple, b: tuple) -> None:
    key_a = canonical_key("github", f"{a[0]}/{a[1]}#{a[2]}")
    key_b = canonical_key("github", f"{b[0]}/{b[1]}#{b[2]}")
    same = (a[0].lower(), a[1].lower(), a[2]) == (b[0].lower(), b[1].lower(), b[2])
    assert (key_a == key_b) == same


@given(triples, st.data())
def test_github_spellings_and_case_variants_collide(triple: tuple, data: st.DataObject) -> None:
    owner, repo, number = triple
    expected = f"github/{owner.lower()}/{repo.lower()}/{number}"
    flip = st.lists(st.booleans(), min_size=len(owner + repo), max_size=len(owner + repo))
    flips = data.draw(flip)
    mixed = "".join(c.swapcase() if f else c for c, f in zip(owner + repo, flips, strict=True))
    o, r = mixed[: len(owner)], mixed[len(owner) :]
    spellings = [
        f"{owner}/{repo}#{number}",
        f"{o}/{r}#{number}",
        f"{owner.upper()}/{repo.swapcase()}#00{number}",
        f"https://github.com/{o}/{r}/issues/{number}",
        f"github.com/{owner}/{repo}/pull/{number}/",
    ]
    for spelling in spellings:
        assert canonical_key("github", spelling) == expected


# --- path -----------------------------------------------------------------------------------


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git that reads no machine configuration and finds no repository above ``tmp_path``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def repo(git_env: Path) -> Path:
    root = git_env / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("")
    (git_env / "link").symlink_to(root)
    return root


def test_path_spellings_give_one_resource(repo: Path) -> None:
    link = repo.parent / "link"
    spellings = [
        (repo, "src/app.py"),
        (repo, "./src/app.py"),
        (repo, "src//app.py"),
        (repo, "src/./app.py"),
        (repo, "src/../src/app.py"),
        (repo, "src/app.py/"),
        (repo, str(repo / "src" / "app.py")),
        (repo, str(link / "src" / "app.py")),
        (repo, f"{repo}/src/../src//app.py"),
        (repo / "src", "app.py"),
        (repo / "src", "../src/app.py"),
        (link / "src", "app.py"),
        (link / "src", str(link / "src" / "app.py")),
        (repo / ".git" / "..", "src/app.py"),
    ]
    for cwd, item in spellings:
        assert canonical_key("path", item, cwd=cwd) == "path/src/app.py", (cwd, item)


def test_path_uses_the_process_directory_by_default(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "src")
    assert canonical_key("path", "app.py") == "path/src/app.py"


def test_path_needs_no_file_and_keeps_inner_symlinks(repo: Path) -> None:
    (repo / "inner").symlink_to(repo / "src")
    assert canonical_key("path", "src/new.py", cwd=repo) == "path/src/new.py"
    assert canonical_key("path", "inner/app.py", cwd=repo) == "path/inner/app.py"
    assert canonical_key("path", "src", cwd=repo) == "path/src"
    assert canonical_key("path", "src/App.py", cwd=repo) == "path/src/App.py"


@pytest.mark.parametrize("item", ["..", "../x", ".", "./", "src/..", "src/../..", "/", "../link"])
def test_path_refuses_the_root_and_the_outside(repo: Path, item: str) -> None:
    with pytest.raises(UsageError) as caught:
        canonical_key("path", item, cwd=repo)
    assert caught.value.exit_code == 2
    assert get_provider("path").accepts in str(caught.value)


def test_path_refuses_absolute_paths_outside(repo: Path) -> None:
    for item in [str(repo.parent / "other"), str(repo), str(repo) + "/", "/etc/passwd"]:
        with pytest.raises(UsageError):
            canonical_key("path", item, cwd=repo)


def test_path_refuses_outside_any_working_tree(git_env: Path) -> None:
    bare = git_env / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    for cwd in [git_env, bare, git_env / "missing"]:
        with pytest.raises(UsageError, match="not inside a git working tree"):
            canonical_key("path", "x", cwd=cwd)


def test_path_refuses_inside_the_git_directory(repo: Path) -> None:
    with pytest.raises(UsageError):
        canonical_key("path", "config", cwd=repo / ".git")


# --- plugins --------------------------------------------------------------------------------

PLUGIN_SOURCE = '''
class Tickets:
    name = "myprov"
    accepts = "T-N tickets"

    def key(self, item, *, options, cwd):
        if not item.upper().startswith("T-"):
            raise ValueError(f"{item!r} is not a ticket")
        if item.upper() == "T-CRASH":
            raise RuntimeError("tracker exploded")
        if item.upper() == "T-INT":
            return 42
        if item.upper() == "T-CTRL":
            return "myprov/\\x01"
        return "myprov/" + item.upper()


instance = Tickets()


def function(item, *, options, cwd):
    """T-N tickets, as a function."""
    return Tickets().key(item, options=options, cwd=cwd)
'''


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install throw-away distributions by putting a ``*.dist-info`` directory on sys.path."""
    modules: list[str] = []

    def install(source: str, entries: dict[str, str]) -> str:
        module = f"gitlease_test_plugin_{uuid.uuid4().hex}"
        modules.append(module)
        where = tmp_path / module
        info = where / f"{module}-1.0.dist-info"
        info.mkdir(parents=True)
        (where / f"{module}.py").write_text(textwrap.dedent(source))
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
        lines = [f"{name} = {module}:{target}" for name, target in entries.items()]
        (info / "entry_points.txt").write_text("[gitlease.providers]\n" + "\n".join(lines) + "\n")
        monkeypatch.syspath_prepend(str(where))
        return module

    reset_plugins()
    yield install
    for module in modules:
        sys.modules.pop(module, None)
    reset_plugins()


@pytest.mark.parametrize("target", ["instance", "Tickets", "function"])
def test_plugin_provider_is_found_and_used(plugins, target: str) -> None:
    plugins(PLUGIN_SOURCE, {"myprov": target})
    assert "myprov" in provider_names()
    assert provider_names() == sorted(provider_names())
    assert canonical_key("myprov", " t-7 ") == "myprov/T-7"
    assert get_provider("myprov").name == "myprov"
    with pytest.raises(UsageError, match="not a ticket") as caught:
        canonical_key("myprov", "x-7")
    assert caught.value.exit_code == 2
    assert "T-N tickets" in str(caught.value)


def test_plugin_is_forgotten_when_it_leaves_sys_path(plugins, monkeypatch) -> None:
    plugins(PLUGIN_SOURCE, {"myprov": "instance"})
    assert canonical_key("myprov", "t-1") == "myprov/T-1"
    monkeypatch.undo()
    assert "myprov" not in provider_names()
    with pytest.raises(UsageError, match="unknown provider"):
        canonical_key("myprov", "t-1")


def test_plugin_failures_are_clean_errors(plugins) -> None:
    plugins(PLUGIN_SOURCE, {"myprov": "instance"})
    with pytest.raises(GitleaseError, match=r"myprov.*RuntimeError: tracker exploded"):
        canonical_key("myprov", "t-crash")
    with pytest.raises(GitleaseError, match="returned int"):
        canonical_key("myprov", "t-int")
    with pytest.raises(UsageError, match="control character"):
        canonical_key("myprov", "t-ctrl")


def test_broken_plugin_gives_a_clean_error(plugins) -> None:
    module = plugins("import gitlease_no_such_module_here\n", {"broken": "provider"})
    missing = plugins(PLUGIN_SOURCE, {"missing": "no_such_attribute"})
    assert {"broken", "missing"} <= set(provider_names())  # listing imports nothing
    assert module not in sys.modules
    with pytest.raises(GitleaseError) as caught:
        canonical_key("broken", "x")
    assert type(caught.value) in (GitleaseError, UsageError)
    message = str(caught.value)
    for part in ("'broken'", module, "gitlease_no_such_module_here"):
        assert part in message
    with pytest.raises(GitleaseError, match=rf"'missing'.*{missing}.*AttributeError"):
        canonical_key("missing", "x")
    assert canonical_key("github", "acme/api#1") == "github/acme/api/1"


def test_builtin_wins_over_a_plugin_of_the_same_name(plugins) -> None:
    module = plugins(PLUGIN_SOURCE, {"github": "instance"})
    assert provider_names().count("github") == 1
    assert canonical_key("github", "acme/api#1") == "github/acme/api/1"
    assert module not in sys.modules


# --- import cost ----------------------------------------------------------------------------


def test_import_is_cheap_and_builtins_skip_entry_points() -> None:
    code = textwrap.dedent(
        """
        import sys
        from gitlease.providers import canonical_key
        assert canonical_key("github", "acme/api#1") == "github/acme/api/1"
        heavy = {"pygit2", "click", "importlib.metadata", "subprocess"} & set(sys.modules)
        assert not heavy, heavy
        """
    )
    from conftest import ROOT

    subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, check=True)
