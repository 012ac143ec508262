"""Which project a repository belongs to, so that all its clones on a host share one store.

Two clones of one project are two repositories with nothing in common but
where they came from. A repository's *project* is therefore named by its
``origin`` remote (or its only remote): a network URL, normalized so that the
https and ssh spellings of one repository give one name
(``github.com/acme/shop``); or, for a remote that is a repository on this
host (a local bare repository, another clone), that repository's own project,
followed back; or, with no remote at all, the repository itself. See
docs/reference/store.md (which store is used) and docs/design.md (why).

Everything a repository says about itself comes from one ``git config`` call
(:func:`read_config`), so that includes, global and system files count as
git counts them.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .._util import TYPE_CHECKING, lazy
from .._util.digest import sha256
from .._util.value import Value
from ..gitio.gitdirs import repository_for
from . import gitconfig

if TYPE_CHECKING:
    from typing import Any, ClassVar


#: The keys one ``git config`` call reads for locating a store, for reaching its remote, and
#: for the commit hooks (``gitlease.trailers``, ``gitlease.requireClaim``).
_KEYS = (
    r"^(gitlease\.(store|remote|trailers|requireclaim|maxttl)|remote\..*\.url"
    r"|url\..*\.(push)?insteadof|core\.sshcommand|credential\..*|http\..*)$"
)
#: Settings for reaching a remote that the repository's own configuration may hold, and that
#: a git process in the store (a repository of its own) would otherwise not see.
_ACCESS = lazy(r"core\.sshcommand|credential\..*|http\..*|url\..*\.(push)?insteadof")
#: What is never copied into the configuration cache: a setting that may hold a secret, and a
#: URL with a user name or password (a token is often spelled as one).
_SECRET_KEY = lazy(r"credential\..*|http\..*\.?extraheader|http\..*proxy", re.IGNORECASE)
_CREDENTIAL_URL = lazy(r"(?:https?|ftps?)://[^/\s@]+@", re.IGNORECASE)
_BOOL_TRUE = ("true", "yes", "on", "1")
_SCP = lazy(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>.*)$")
_NETWORK_SCHEMES = ("ssh", "git+ssh", "ssh+git", "git", "http", "https", "ftp", "ftps")
_MAX_HOPS = 8
_DEFAULT_PORTS = {
    "ssh": 22, "git+ssh": 22, "ssh+git": 22, "git": 9418, "http": 80, "https": 443,
    "ftp": 21, "ftps": 990,
}  # fmt: skip


class RepoConfig(Value):
    """What a repository's git configuration (every scope) says about gitlease and remotes."""

    __slots__ = ("store", "remote", "remotes", "instead_of", "access", "trailers", "require_claim",
                 "max_ttl")  # fmt: skip
    _defaults: ClassVar[dict[str, Any]] = {
        "trailers": False, "require_claim": False, "max_ttl": None
    }  # fmt: skip
    store: str | None  # gitlease.store
    remote: str | None  # gitlease.remote ("" turns it off)
    remotes: dict[str, str]  # remote name -> url, as written
    instead_of: dict[str, str]  # url.<base>.insteadOf: prefix -> base
    #: The repository's own (local and worktree) settings for reaching a remote, in order.
    access: tuple[tuple[str, str], ...]
    trailers: bool  # gitlease.trailers (as git reads a boolean)
    require_claim: bool  # gitlease.requireClaim
    max_ttl: str | None  # gitlease.maxTtl, as written (None: not set, or set without a value)

    def url_of(self, name: str) -> str | None:
        """The URL of the remote ``name`` with ``url.<base>.insteadOf`` applied, as git does."""
        url = self.remotes.get(name)
        return None if url is None else rewrite_url(url, self.instead_of)

    def identity_remote(self) -> str | None:
        """The remote that names the project: ``origin``, else the only remote, else none."""
        if "origin" in self.remotes:
            return "origin"
        if len(self.remotes) == 1:
            return next(iter(self.remotes))
        return None


class Project(Value):
    """A repository's project: its identity (the store's key) and how it was found."""

    __slots__ = ("identity", "why")
    identity: str  # e.g. github.com/acme/shop, or file:///srv/git/shop.git
    why: str  # for `gitlease where`


def read_config(git_dir: Path) -> RepoConfig:
    """The repository at ``git_dir``'s configuration, as one ``git config`` call reads it,
    cached by every file it depends on (:mod:`gitlease.store.gitconfig`; STORE if git cannot
    read it)."""
    store = remote = None
    trailers = require_claim = False
    max_ttl: str | None = None
    remotes: dict[str, str] = {}
    instead_of: dict[str, str] = {}
    access: list[tuple[str, str]] = []
    for scope, _, key, raw in gitconfig.read(git_dir, _KEYS, keep=_kept, secret=_secret):
        lowered = key.lower()
        value = raw or ""
        if scope in ("local", "worktree") and _ACCESS.fullmatch(lowered):
            access.append((key, value))
        if lowered == "gitlease.store":
            store = value
        elif lowered == "gitlease.remote":
            remote = value
        elif lowered == "gitlease.trailers":
            trailers = _bool(raw)
        elif lowered == "gitlease.requireclaim":
            require_claim = _bool(raw)
        elif lowered == "gitlease.maxttl":
            max_ttl = raw  # (the last one wins, as for `git config --get`)
        elif lowered.startswith("remote.") and lowered.endswith(".url"):
            remotes.setdefault(key[len("remote.") : -len(".url")], value)
        elif lowered.startswith("url.") and lowered.endswith(".insteadof"):
            instead_of[value] = key[len("url.") : -len(".insteadof")]
    return RepoConfig(
        store, remote, remotes, instead_of, tuple(access), trailers, require_claim, max_ttl
    )


def _kept(entry: gitconfig.Entry) -> bool:
    """Whether :func:`read_config` uses the entry: access settings only from the repository
    itself (a global ``http.*`` setting is no business of the store's)."""
    scope, _, key, _ = entry
    lowered = key.lower()
    if lowered.startswith(("credential.", "http.", "core.")):
        return scope in ("local", "worktree")
    return True


def _secret(entry: gitconfig.Entry) -> bool:
    _, _, key, value = entry
    return bool(
        _SECRET_KEY.fullmatch(key)
        or _CREDENTIAL_URL.search(key)
        or _CREDENTIAL_URL.search(value or "")
    )


def _bool(value: str | None) -> bool:
    """A git boolean as ``git config --type=bool`` reads it (a key without a value: true)."""
    return value is None or value.strip().lower() in _BOOL_TRUE


def rewrite_url(url: str, instead_of: dict[str, str]) -> str:
    """``url.<base>.insteadOf``: the longest matching prefix is replaced by its base."""
    best = max((p for p in instead_of if p and url.startswith(p)), key=len, default=None)
    return url if best is None else instead_of[best] + url[len(best) :]


def normalize_url(url: str) -> str | None:
    """``host/path`` (``host:port/path`` for a port that is not the scheme's default) of a
    network URL, lower-cased, without user and ``.git``; None when ``url`` names a path on
    this host (or is not a URL gitlease can read). Two ports are two servers: two projects."""
    if "://" in url:
        try:
            parts = urlsplit(url)
            host = parts.hostname
            port = parts.port
        except ValueError:
            return None
        scheme = parts.scheme.lower()
        if scheme not in _NETWORK_SCHEMES or not host:
            return None
        if port is not None and port != _DEFAULT_PORTS.get(scheme):
            host = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        path = unquote(parts.path)
    else:
        match = _SCP.match(url)
        if match is None or "/" in match["host"] or len(match["host"]) < 2:
            return None  # a path (c:/x is a drive letter, not a host)
        host, path = match["host"], match["path"]
    path = re.sub(r"/+", "/", path).strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return f"{host.lower()}/{path.lower()}".rstrip("/")


def local_path(url: str, base: Path) -> Path | None:
    """The path on this host that ``url`` names (``file://`` or a plain path), or None."""
    if url.startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    if "://" in url or normalize_url(url) is not None:
        return None
    path = Path(url).expanduser()
    return path if path.is_absolute() else base / path


def identify(common_dir: Path, config: RepoConfig, base: Path) -> Project:
    """The project of the repository at ``common_dir``, following local remotes back."""
    seen: set[Path] = set()
    here, cfg = common_dir.resolve(), config
    hops: list[str] = []
    for _ in range(_MAX_HOPS):
        seen.add(here)
        name = cfg.identity_remote()
        if name is None:
            return Project(_path_identity(here), _why(hops))
        url = cfg.url_of(name) or ""
        hops.append(f"remote {name} = {url}")
        network = normalize_url(url)
        if network is not None:
            return Project(network, _why(hops))
        target = local_path(url, base)
        repo = repository_for(target) if target is not None else None
        if repo is None or repo in seen:
            return Project(_path_identity(target or Path(url)), _why(hops))
        here, base = repo, repo.parent
        cfg = read_config(repo)
    return Project(_path_identity(here), _why(hops))


def _why(hops: list[str]) -> str:
    if not hops:
        return "the repository has no remote"
    return "from " + ", then ".join(hops)


def _path_identity(path: Path) -> str:
    """A repository on this host by its path (its top directory rather than its ``.git``)."""
    path = path.absolute()
    return "file://" + str(path.parent if path.name == ".git" else path)


def store_name(identity: str) -> str:
    """The directory name of a project's store: readable, and unique by a hash."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", identity.lower().removeprefix("file://"))
    slug = slug.strip("-.")[:60].rstrip("-.") or "project"
    digest = sha256(identity.encode("utf-8")).hexdigest()[:12]
    return f"{slug}-{digest}.git"
