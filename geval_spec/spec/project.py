"""Where specs live and how a REF names one: REF -> :class:`SpecSource` (text, origin, git revision).

A project is a directory with a ``specs/`` folder (found by walking up from the
current directory). A REF is one of:

- ``name``: the spec in ``specs/`` whose ``name`` key is ``name`` (working copy);
- ``path/to/file.yaml``: that file;
- ``name@<git-rev>``: the spec as committed at that revision;
- ``name@vN``: the newest commit of the spec's file whose ``version`` is N;
- a run id (``run_...``), which :mod:`geval_spec.analysis.resolve` looks up in the store.

Specs read from git carry the revision, so templates are read at the same
revision; data files are read from the working tree (runs record their hash).
"""

from __future__ import annotations

import os

import re
import subprocess
from pathlib import Path

from geval_spec.errors import Problem, RefError, SpecError
from geval_spec.files import OutsideProject, ReadError, confine, decode_text, read_text
from geval_spec.values import frozen

RUN_ID = re.compile(r"^run_[0-9a-z]{6,40}$")
_VERSION_REF = re.compile(r"^v([0-9]+)$")
_NAME_LINE = re.compile(r"^name:\s*['\"]?([a-z0-9-]+)['\"]?\s*(#.*)?$", re.M)
_VERSION_LINE = re.compile(r"^version:\s*['\"]?([0-9]+)['\"]?\s*(#.*)?$", re.M)


@frozen
class SpecSource:
    """The text of one spec file and where it came from."""

    display: str  # how errors name the file, e.g. specs/x.yaml or specs/x.yaml@3f2a1c9
    text: str
    root: Path  # project root
    rel: str | None  # path relative to the root, when the file is inside it
    rev: str | None = None  # full commit id when read from git

    @property
    def report_name(self) -> str:
        """How a report names the file: the same from any folder (``display`` is relative to the current one)."""
        if self.rev is not None:
            return self.display
        return self.rel if self.rel is not None else project_path(Path(self.display), self.root)

    @property
    def base_dir(self) -> Path:
        """Directory that relative paths in the spec are resolved against (working tree)."""
        if self.rel is None:
            return Path(self.display).resolve().parent
        return (self.root / self.rel).parent

    @property
    def confinement(self) -> Path:
        """The folder files the spec names must stay in: the project, or the spec's folder outside one."""
        return self.root if self.rel is not None else self.base_dir

    def inside(self, rel_path: str, what: str = "file") -> Path:
        """``rel_path`` (relative to the spec) as a working-tree path; OutsideProject if it leads out."""
        return confine(self.base_dir, rel_path, self.confinement, what)

    def read_relative(self, rel_path: str, what: str = "file") -> tuple[str, str]:
        """Read a file named relative to the spec (at the same git revision if any), inside the project only.

        Returns (display name, text). Raises OutsideProject (a ReadError) for a
        path that leads out of the project (``..``, absolute, a symbolic link),
        FileNotFoundError when there is no such file, ReadError for a file that
        is not a regular file, larger than 1 MB or not UTF-8.
        """
        if self.rev is not None and self.rel is not None:
            target = _git_target(self.rel, rel_path, what)
            mode = _git_mode(self.root, self.rev, target)
            if mode is None:
                raise FileNotFoundError(target)
            if mode == "120000":
                raise OutsideProject(f"{what} {rel_path!r} is a symbolic link at {self.rev[:7]}; files read from "
                                     "a git revision may not be links")
            text = git_show(self.root, self.rev, target, what, MAX_TEMPLATE_BYTES)
            if text is None:
                raise FileNotFoundError(target)
            return f"{target}@{self.rev[:7]}", text
        path = self.inside(rel_path, what)
        if not path.exists():
            raise FileNotFoundError(str(path))
        return display_path(path, self.root), read_text(path, what, max_bytes=MAX_TEMPLATE_BYTES)

    def commit(self) -> str | None:
        """The commit the spec was read at, else the working tree's HEAD (None outside git)."""
        if self.rev:
            return self.rev
        out = git(self.root, "rev-parse", "HEAD")
        return out.strip() if out else None


MAX_TEMPLATE_BYTES = 1 << 20  # a template (or lock file) larger than 1 MB is not a prompt
MAX_SPEC_BYTES = 5_000_000  # the YAML reader's limit too


def _git_target(spec_rel: str, rel_path: str, what: str) -> str:
    """The repository path of ``rel_path`` (relative to the spec at ``spec_rel``); OutsideProject if it leads out."""
    if "\x00" in rel_path:
        raise OutsideProject(f"{what} {rel_path.split(chr(0))[0]!r}: the path contains a NUL byte; not allowed")
    if rel_path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", rel_path):
        raise OutsideProject(f"{what} {rel_path!r} is outside the project; only files inside it may be read")
    parts: list[str] = []
    for part in (Path(spec_rel).parent.as_posix() + "/" + rel_path.replace("\\", "/")).split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise OutsideProject(f"{what} {rel_path!r} is outside the project; only files inside it may be read")
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _git_mode(root: Path, rev: str, rel: str) -> str | None:
    """The file mode of ``rel`` at ``rev`` (100644, 100755, 120000 for a link), or None when absent."""
    out = git(root, "ls-tree", rev, "--", rel)  # relative to the project root, which may be a folder of the repository
    if not out:
        return None
    return out.split(None, 1)[0]


def display_path(path: Path, root: Path | None = None) -> str:
    """How messages show a path: relative to the current directory, else to the project root, else as is."""
    for base in (Path.cwd(), root):
        if base is None:
            continue
        try:
            return path.resolve().relative_to(base.resolve()).as_posix() or "."
        except ValueError:
            continue
    return str(path)


def project_path(path: Path, root: Path) -> str:
    """How a report names a path: relative to the project root, else absolute (never relative to the current
    folder: a report written from specs/ named the data data/x.jsonl, from the root specs/data/x.jsonl)."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return resolved.as_posix()


def find_root(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` that has a ``specs/`` folder."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "specs").is_dir():
            return candidate
    return here


class Project:
    def __init__(self, root: Path):
        self.root = root.resolve()
        self.specs_dir = self.root / "specs"

    @property
    def default_db(self) -> Path:
        return self.root / ".geval" / "results.duckdb"

    def spec_files(self) -> list[Path]:
        if not self.specs_dir.is_dir():
            return []
        files = [p for p in self.specs_dir.iterdir()
                 if p.suffix in (".yaml", ".yml") and not p.name.endswith((".lock.yaml", ".lock.yml")) and p.is_file()]
        return sorted(files)

    def source_of(self, path: Path) -> SpecSource:
        path = path.resolve()
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            rel = None
        try:
            text = read_text(path, "spec file", max_bytes=MAX_SPEC_BYTES)
        except ReadError as exc:
            raise SpecError(problems=[Problem(str(exc), file=display_path(path, self.root), line=exc.line)]) from None
        return SpecSource(display=display_path(path, self.root), text=text, root=self.root, rel=rel)

    def names(self) -> dict[str, list[Path]]:
        """Spec name -> files declaring it (read cheaply from the ``name:`` line)."""
        found: dict[str, list[Path]] = {}
        for path in self.spec_files():
            try:
                text = read_text(path, "spec file", max_bytes=MAX_SPEC_BYTES)
            except ReadError:  # named by its file: loading it says what is wrong ("no spec named" said nothing)
                text = ""
            m = _NAME_LINE.search(text)
            name = m.group(1) if m else path.stem
            found.setdefault(name, []).append(path)
        return found

    def duplicate_name_problems(self) -> list[Problem]:
        problems = []
        for name, paths in sorted(self.names().items()):
            if len(paths) > 1:
                shown = " and ".join(display_path(p, self.root) for p in paths)
                problems.append(Problem(f"spec name {name!r} is declared by {shown}; names must be unique",
                                        file=display_path(paths[1], self.root), line=_line_of_name(paths[1]), col=1,
                                        key="name"))
        return problems

    def path_of(self, name: str) -> Path:
        paths = self.names().get(name)
        if not paths:
            known = sorted(self.names())
            import difflib

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else (
                f"specs here: {', '.join(known)}" if known else f"no specs in {self.specs_dir}")
            if RUN_ID.match(name):  # audit, label-sample, run, import and render take a spec, not a run
                raise RefError(problems=[Problem(f"{name!r} is a run id; this command takes a spec REF: its name, "
                                                 "its file, or name@<git-rev>", hint=hint)])
            if name.startswith("run_"):  # meant as a run id: those are run_ and 20 characters of 0-9 and a-f
                raise RefError(problems=[Problem(f"{name!r} is neither a run id nor a spec name",
                                                 hint="a run id is run_ and 20 characters of 0-9 and a-f, as "
                                                      "`run` prints it last; " + hint)])
            raise RefError(problems=[Problem(f"no spec named {name!r}", hint=hint)])
        if len(paths) > 1:
            raise SpecError(problems=self.duplicate_name_problems())
        return paths[0]

    def resolve(self, ref: str) -> SpecSource:
        """Turn a spec REF (not a run id) into the spec's text and origin."""
        try:
            return self._resolve(ref)
        except (OSError, ValueError) as exc:  # a name longer than the OS allows, a NUL byte, ...
            shown = ref if len(ref) <= 80 else ref[:77] + "..."
            reason = "the name is too long" if getattr(exc, "errno", None) == 36 else (
                getattr(exc, "strerror", None) or str(exc))
            raise RefError(problems=[Problem(f"no such spec {shown!r}: {reason}")]) from None

    def _resolve(self, ref: str) -> SpecSource:
        if "@" in ref and not Path(ref).exists():
            name, _, rev = ref.partition("@")
            if not rev:
                raise RefError(problems=[Problem(f"{ref!r}: nothing after '@'", hint="use name@<git-rev> or name@vN")])
            return self._resolve_git(name, rev, ref)
        as_path = Path(ref)
        if as_path.suffix in (".yaml", ".yml") or "/" in ref or as_path.is_file():
            if not as_path.is_file():
                there = os.path.lexists(as_path)
                raise RefError(problems=[Problem(f"{ref} is not a spec file: a folder, device, FIFO or socket" if there
                                                 else f"no such spec file: {ref}")])
            return self.source_of(as_path)
        return self.source_of(self.path_of(ref))

    # -- git ---------------------------------------------------------------
    def _rel_path_for(self, name: str, rev: str | None) -> str:
        """Where the spec called ``name`` lives (working copy first, else at ``rev``)."""
        paths = self.names().get(name)
        if paths:
            return paths[0].resolve().relative_to(self.root).as_posix()
        if rev:
            listing = git(self.root, "ls-tree", "--name-only", rev, "specs/")
            for rel in (listing or "").splitlines():
                if rel.endswith((".yaml", ".yml")) and ".lock." not in rel:
                    try:
                        text = git_show(self.root, rev, rel) or ""
                    except ReadError:  # not a spec file: not this spec
                        continue
                    m = _NAME_LINE.search(text)
                    if m and m.group(1) == name:
                        return rel
        raise RefError(problems=[Problem(f"no spec named {name!r} in {self.specs_dir}")])

    def _resolve_git(self, name: str, rev: str, ref: str) -> SpecSource:
        if git(self.root, "rev-parse", "--git-dir") is None:
            raise RefError(problems=[Problem(f"{ref!r} needs git, but {self.root} is not a git repository")])
        m = _VERSION_REF.match(rev)
        if m:
            want = int(m.group(1))
            rel = self._rel_path_for(name, "HEAD")
            log = git(self.root, "log", "--format=%H", "--follow", "--", rel) or ""
            for commit in log.split():
                for candidate in self._paths_at(commit, rel):
                    try:
                        text = git_show(self.root, commit, candidate)
                    except ReadError:  # this commit's file cannot be the spec
                        continue
                    if text is None:
                        continue
                    vm, nm = _VERSION_LINE.search(text), _NAME_LINE.search(text)
                    if vm and int(vm.group(1)) == want and (not nm or nm.group(1) == name):
                        return SpecSource(display=f"{candidate}@{commit[:7]}", text=text, root=self.root,
                                          rel=candidate, rev=commit)
            raise RefError(problems=[Problem(f"{ref!r}: no commit of {rel} has version {want}",
                                             hint="versions are read from committed files only; commit the spec")])
        found = git(self.root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if not found:
            raise RefError(problems=[Problem(f"{ref!r}: {rev!r} is not a git revision here")])
        commit = found.strip()
        rel = self._rel_path_for(name, commit)
        try:
            text = git_show(self.root, commit, rel, "spec file")
        except ReadError as exc:
            raise RefError(problems=[Problem(f"{ref!r}: {rel} at {rev}: {exc}")]) from None
        if text is None:
            raise RefError(problems=[Problem(f"{ref!r}: {rel} does not exist at {rev}")])
        return SpecSource(display=f"{rel}@{commit[:7]}", text=text, root=self.root, rel=rel, rev=commit)

    def _paths_at(self, commit: str, rel: str) -> list[str]:
        """The path the file had at ``commit`` (it may have been renamed since)."""
        changed = git(self.root, "show", "--name-only", "--relative", "--format=", commit, "--", "specs/") or ""
        names = [p for p in changed.split() if p.endswith((".yaml", ".yml"))]
        return [rel] + [p for p in names if p != rel]


def _line_of_name(path: Path) -> int | None:
    try:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("name:"):
                return n
    except OSError:
        pass
    return None


def git(root: Path, *args: str) -> str | None:
    """What a git command printed (bytes that are not UTF-8 as U+FFFD), or None when it failed."""
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, errors="replace",
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_show(root: Path, rev: str, rel: str, what: str = "file", max_bytes: int = MAX_SPEC_BYTES) -> str | None:
    """The text of ``rel`` (relative to ``root``, which may be a folder inside the repository) at ``rev``; None when
    it does not exist there. ReadError when it is larger than ``max_bytes`` or not UTF-8, as for a file of the
    working tree (a template at a revision that was not UTF-8 ended in an internal error, exit 70)."""
    size = (git(root, "cat-file", "-s", f"{rev}:./{rel}") or "").strip()  # before git prints it all
    if size.isdigit() and int(size) > max_bytes:
        raise ReadError(f"{what} is too large: {int(size):,} bytes at {rev[:7]}, more than the limit of "
                        f"{max_bytes:,} bytes (a fixed limit)")
    try:
        out = subprocess.run(["git", "-C", str(root), "show", f"{rev}:./{rel}"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    if len(out.stdout) > max_bytes:
        raise ReadError(f"{what} is too large: {len(out.stdout):,} bytes at {rev[:7]}, more than the limit of "
                        f"{max_bytes:,} bytes (a fixed limit)")
    return decode_text(out.stdout, what)
