#!/usr/bin/env python3
"""Recreate the shared corpus (``../shared/corpus``) from its public sources, pinned by commit.

The tests read real inputs written by others from the shared corpus, which the repository
does not carry (tests/conftest.py: ``$SCIGA_CORPUS``, else ``../shared/corpus`` beside the
checkout). On a machine that is online this script rebuilds that folder::

    python scripts/fetch_corpus.py                 # into $SCIGA_CORPUS or <checkout>/../shared/corpus
    python scripts/fetch_corpus.py --dest DIR      # somewhere else
    python scripts/fetch_corpus.py --check DIR     # only verify DIR against the pins (exit 0/1)

Every file of the corpus is named in ``scripts/corpus_sources.json`` (the one pinned
manifest): where it comes from (GitHub ``owner/repo``, the full 40-hex commit, the path in
that repository) and how it is checked. Files come from
``<base-url>/<owner>/<repo>/<commit>/<path>`` (``--base-url``, default
https://raw.githubusercontent.com, so a test can point it at a local mirror). Three kinds:

- byte-pinned, ``"kind": "copy"``: ``html/2303.17564.html``, every file of ``arxiv_api/``,
  ``tex/dd3d/``, ``tex/2603.21852/`` and ``tex/1709.07020/1709.07020v1.tar.gz``. Each is
  downloaded and must have the manifest's sha256 (where the manifest lists several
  candidate sources, e.g. a folder that was renamed in its repository, the first whose
  bytes match wins).
- byte-pinned, ``"kind": "tar-member"``: ``html/submission-5393936.html``, one member of
  ``5393936.tar.gz`` in arXiv/arxiv-view-as-html. The tarball is read as a stream; only a
  regular-file member with a relative name free of ``..``, below the size limit, whose bytes
  have the pinned sha256 is written (nothing is extracted with tarfile's extract*).
- regenerated, ``"kind": "latexml"``: ``latexml/*.html`` were made by Debian's LaTeXML 0.8.7
  (``latexmlc --format=html5``) from TeX trees; the script assembles the tree (corpus files
  it has just verified, plus files fetched from the pinned commit, which are pinned by the
  commit only) and runs ``latexmlc`` (``apt-get install latexml``; ``bash scripts/setup.sh``
  installs it). LaTeXML writes its run's date into the page, so these are checked by a
  *normalised* sha256: the ``Generated on <date> by`` text is replaced by a fixed one before
  hashing. A page whose regenerated text differs (another LaTeXML or TeX installation) is
  kept, with a warning; ``--check`` then reports it. ``--no-convert`` skips them and says
  which pages were not made.

A file whose source could not be located (``"source": null``: ``latexml/honline.html``, whose
TeX tree cannot be pinned from its repository's public history) is reported as not
fetchable: ask the maintainers for it. ``SOURCES.md`` (provenance notes) is not fetched; a
short note is written in its place when the folder has none.

Every download is verified before it is put in place: it is written to a temporary file
beside its destination and renamed only once its sha256 matches, so nothing half-written is
left. A file already in place with the pinned hash is not downloaded again. Only the
standard library is used; network errors end the run with one sentence naming the URL.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MANIFEST = HERE / "corpus_sources.json"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
CHUNK = 1 << 16
MAX_DOWNLOAD = 256 << 20  # a tarball or an unpinned TeX input; pinned files are capped at their size
MAX_MEMBER = 64 << 20  # one member of a tarball
MAX_MEMBERS = 20_000
LATEXML_TIMEOUT_S = 1800
LATEXML_PACKAGE = "latexml"  # Debian's package of LaTeXML 0.8.7, which made latexml/*.html
COMMIT_RE = re.compile(r"[0-9a-f]{40}")
# "Generated on Sun Nov 22 03:40:15 2026 by": in the head comment and the footer of a page.
GENERATED_RE = re.compile(rb"Generated\s+on\s+[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4}\s+by")
# Lets ImageMagick (and so LaTeXML) read PDF/EPS figures; Debian's /etc policy refuses them.
IMAGE_POLICY = """<?xml version="1.0" encoding="UTF-8"?>
<policymap>
  <policy domain="coder" rights="read|write" pattern="{PS,PS2,PS3,EPS,EPSI,EPSF,PDF}" />
</policymap>
"""
SOURCES_NOTE = """# Shared corpus (recreated)

Made by `python scripts/fetch_corpus.py` from the public sources pinned in
`scripts/corpus_sources.json` (repository, full commit, path, sha256 of each file).
The files belong to their authors; use them for testing only.
"""


class FetchError(Exception):
    """One file could not be put in place; the message is one sentence."""


class NetworkError(Exception):
    """The network failed (not a missing file): the run stops; the message is one sentence."""


# ------------------------------------------------------------------ the manifest


def load_manifest(path: Path = MANIFEST) -> dict:
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    for entry in manifest["files"]:
        safe_relpath(entry["dest"])
        for src in entry.get("sources") or ():
            if not COMMIT_RE.fullmatch(src["commit"]):
                raise SystemExit(f"{path}: {entry['dest']}: commit {src['commit']!r} is not a full 40-hex SHA.")
    return manifest


def safe_relpath(name: str) -> PurePosixPath:
    """``name`` as a relative path with no ``..`` (or raise ValueError)."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or any(part in ("..", "") for part in p.parts) or "\\" in name:
        raise ValueError(f"unsafe path {name!r}")
    return p


def normalised_sha256(data: bytes) -> str:
    """sha256 of a LaTeXML page with its run's date taken out."""
    return hashlib.sha256(GENERATED_RE.sub(b"Generated on (date) by", data)).hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def matches(entry: dict, path: Path) -> bool:
    """Whether the file at ``path`` is the one the manifest pins."""
    if not path.is_file():
        return False
    if entry["kind"] == "latexml":
        return normalised_sha256(path.read_bytes()) == entry["normalised_sha256"]
    return file_sha256(path) == entry["sha256"]


# ------------------------------------------------------------------ downloads


def source_url(base_url: str, src: dict) -> str:
    return f"{base_url.rstrip('/')}/{src['repo']}/{src['commit']}/{urllib.parse.quote(src['path'], safe='/')}"


def download(url: str, out, *, limit: int, timeout: float) -> None:
    """Stream ``url`` into the binary file ``out``. A missing file (HTTP 404/410) raises
    FileNotFoundError; more than ``limit`` bytes raises FetchError; a failure of the network
    (or of the server) raises NetworkError."""
    request = urllib.request.Request(url, headers={"User-Agent": "sciga-builder fetch_corpus.py"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            n = 0
            while chunk := response.read(CHUNK):
                n += len(chunk)
                if n > limit:
                    raise FetchError(f"{url} sends more than the {limit} bytes expected")
                try:
                    out.write(chunk)
                except OSError as e:
                    raise FetchError(f"writing what {url} sends failed ({e})") from None
    except urllib.error.HTTPError as e:
        if e.code in (404, 410):
            raise FileNotFoundError(url) from None
        raise NetworkError(
            f"Downloading {url} failed with HTTP {e.code} ({e.reason}); retry later, or check the network."
        ) from None
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as e:
        reason = getattr(e, "reason", None) or e or type(e).__name__
        raise NetworkError(
            f"Could not download {url} ({reason}); check the network (or --base-url) and retry."
        ) from None
    except ValueError as e:
        raise NetworkError(f"Could not download {url} ({e}); check --base-url.") from None


def fetch_pinned(entry: dict, dest: Path, base_url: str, timeout: float) -> str:
    """Put the byte-pinned ``entry`` at ``dest``; returns the URL it came from."""
    tried = []
    for src in entry["sources"]:
        url = source_url(base_url, src)
        tmp = tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part", delete=False)
        try:
            with tmp:
                download(url, tmp, limit=entry["size"], timeout=timeout)
            got = file_sha256(Path(tmp.name))
            if got == entry["sha256"]:
                os.replace(tmp.name, dest)
                return url
            tried.append(f"{url} has sha256 {got}")
        except FileNotFoundError:
            tried.append(f"{url} is not there (HTTP 404)")
        except FetchError as e:
            tried.append(str(e))
        finally:
            if os.path.exists(tmp.name):
                os.unlink(tmp.name)
    raise FetchError(
        f"{entry['dest']}: no pinned source gave the bytes with sha256 {entry['sha256']} "
        f"({'; '.join(tried)}), so nothing was written"
    )


def safe_members(tf: tarfile.TarFile):
    """The regular-file members of ``tf`` with safe relative names and sizes, one at a time."""
    for count, member in enumerate(tf, 1):
        if count > MAX_MEMBERS:
            return
        if not member.isreg() or member.size > MAX_MEMBER:
            continue
        try:
            name = safe_relpath(member.name.removeprefix("./"))
        except ValueError:
            continue
        yield name, member


def fetch_tar_member(entry: dict, dest: Path, base_url: str, timeout: float) -> str:
    """Put the one member of a pinned tarball at ``dest``; returns ``url#member``."""
    tried = []
    wanted = entry.get("member")
    pattern = entry.get("member_pattern", "*")
    for src in entry["sources"]:
        url = source_url(base_url, src)
        with tempfile.TemporaryFile() as archive:
            try:
                download(url, archive, limit=MAX_DOWNLOAD, timeout=timeout)
            except FileNotFoundError:
                tried.append(f"{url} is not there (HTTP 404)")
                continue
            except FetchError as e:
                tried.append(str(e))
                continue
            archive.seek(0)
            try:
                with tarfile.open(fileobj=archive, mode="r:*") as tf:
                    for name, member in safe_members(tf):
                        if (wanted and str(name) != wanted) or not (wanted or name.match(pattern)):
                            continue
                        if member.size != entry["size"]:
                            continue
                        if _write_member(tf, member, dest, entry["sha256"]):
                            return f"{url}#{name}"
            except (tarfile.TarError, EOFError, OSError) as e:
                tried.append(f"{url} is not a readable tarball ({e})")
                continue
            tried.append(f"{url} has no member {wanted or pattern!r} with that sha256")
    raise FetchError(
        f"{entry['dest']}: no pinned tarball held a member with sha256 {entry['sha256']} "
        f"({'; '.join(tried)}), so nothing was written"
    )


def _write_member(tf: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, sha256: str) -> bool:
    f = tf.extractfile(member)
    if f is None:
        return False
    h = hashlib.sha256()
    tmp = tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part", delete=False)
    try:
        with tmp, f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
                tmp.write(chunk)
        if h.hexdigest() != sha256:
            return False
        os.replace(tmp.name, dest)
        return True
    finally:
        if os.path.exists(tmp.name):
            os.unlink(tmp.name)


def extract_safely(archive: Path, into: Path) -> None:
    """The regular files of ``archive`` under ``into`` (no links, no ``..``, size-limited)."""
    with tarfile.open(archive, mode="r:*") as tf:
        for name, member in safe_members(tf):
            target = into.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            f = tf.extractfile(member)
            if f is not None:
                with f, open(target, "wb") as out:
                    shutil.copyfileobj(f, out, CHUNK)


# ------------------------------------------------------------------ LaTeXML pages


def assemble_tree(entry: dict, corpus: Path, work: Path, base_url: str, timeout: float) -> list[str]:
    """The TeX tree of a LaTeXML page under ``work``; returns warnings (inputs not found)."""
    tree = entry["tree"]
    warnings = []
    if tree.get("corpus_dir"):
        base = corpus / tree["corpus_dir"]
        for p in sorted(base.rglob("*")):
            if p.is_file():
                target = work / p.relative_to(base)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, target)
    if tree.get("corpus_tarball"):
        extract_safely(corpus / tree["corpus_tarball"], work)
    for path in tree.get("files", ()):
        target = work.joinpath(*safe_relpath(path).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        for commit in tree["commits"]:
            url = source_url(base_url, {"repo": tree["repo"], "commit": commit, "path": path})
            try:
                with open(target, "wb") as out:
                    download(url, out, limit=MAX_DOWNLOAD, timeout=timeout)
                break
            except (FileNotFoundError, FetchError):
                target.unlink(missing_ok=True)
        else:
            warnings.append(path)
    return warnings


def convert(entry: dict, corpus: Path, dest: Path, base_url: str, timeout: float, latexmlc: str) -> str:
    """Regenerate one LaTeXML page into ``dest``; returns what happened, in words."""
    with tempfile.TemporaryDirectory(prefix="sciga-corpus-latexml-") as tmp:
        work, out, cfg = Path(tmp, "src"), Path(tmp, "out"), Path(tmp, "config")
        for d in (work, out, cfg / "ImageMagick"):
            d.mkdir(parents=True)
        (cfg / "ImageMagick" / "policy.xml").write_text(IMAGE_POLICY, encoding="utf-8")
        missing = assemble_tree(entry, corpus, work, base_url, timeout)
        tree = entry["tree"]
        if not (work / tree["entry"]).is_file():
            where = f"{tree['repo']}@{tree['commits'][0]}" if tree.get("repo") else "the corpus"
            raise FetchError(
                f"{entry['dest']}: its TeX entry file {tree['entry']} is not in {where}, so it was not made"
            )
        page = out / Path(entry["dest"]).name
        env = dict(os.environ, XDG_CONFIG_HOME=str(cfg))
        cmd = [latexmlc, "--format=html5", f"--dest={page}", entry["tree"]["entry"]]
        try:
            with open(Path(tmp, "latexmlc.log"), "wb") as log:
                subprocess.run(
                    cmd,
                    cwd=work,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=env,
                    timeout=LATEXML_TIMEOUT_S,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            raise FetchError(f"{entry['dest']}: latexmlc did not finish within {LATEXML_TIMEOUT_S} s") from None
        if not page.is_file():
            log_tail = Path(tmp, "latexmlc.log").read_text(encoding="utf-8", errors="replace")[-400:]
            raise FetchError(f"{entry['dest']}: latexmlc wrote no page (its log ends: {log_tail.strip()!r})")
        data = page.read_bytes()
        tmp_dest = tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part", delete=False)
        try:
            with tmp_dest:
                tmp_dest.write(data)
            os.replace(tmp_dest.name, dest)
        finally:
            if os.path.exists(tmp_dest.name):
                os.unlink(tmp_dest.name)
    how = "regenerated with latexmlc"
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        how += f" ({len(missing)} inputs not found at the pinned commit: {', '.join(missing[:3])}{more})"
    if normalised_sha256(data) != entry["normalised_sha256"]:
        return how + (
            "; WARNING: it differs from the pinned conversion (Debian's LaTeXML 0.8.7), so tests that "
            "compare its text may disagree; --check will report it"
        )
    return how + ", identical to the pinned conversion apart from its date"


# ------------------------------------------------------------------ the commands


def default_dest() -> Path:
    env = os.environ.get("SCIGA_CORPUS")
    return Path(env) if env else ROOT.parent / "shared" / "corpus"


def check(manifest: dict, folder: Path) -> int:
    """Verify ``folder`` against the pins: 0 when every file matches, else 1 (saying which)."""
    if not folder.is_dir():
        print(f"{folder} is not a folder.", file=sys.stderr)
        return 1
    problems = []
    known = {"SOURCES.md"}
    for entry in manifest["files"]:
        known.add(entry["dest"])
        path = folder / entry["dest"]
        how = "normalised sha256" if entry["kind"] == "latexml" else "sha256"
        if not path.is_file():
            problems.append(f"{entry['dest']}: missing")
        elif not matches(entry, path):
            problems.append(f"{entry['dest']}: differs from the pinned {how}")
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if p.is_file() and rel not in known:
            problems.append(f"{rel}: not in the manifest (scripts/corpus_sources.json)")
    for line in problems:
        print(line)
    if problems:
        print(f"{folder}: {len(problems)} difference(s) from the pins.", file=sys.stderr)
        return 1
    print(f"{folder}: all {len(manifest['files'])} files match the pins.")
    return 0


def fetch(manifest: dict, dest_root: Path, base_url: str, timeout: float, convert_pages: bool) -> int:
    dest_root.mkdir(parents=True, exist_ok=True)
    failures, not_made, differing = [], [], []
    entries = manifest["files"]
    # Pages are regenerated last: their TeX trees come from the byte-pinned files.
    ordered = [e for e in entries if e["kind"] != "latexml"] + [e for e in entries if e["kind"] == "latexml"]
    latexmlc = shutil.which("latexmlc")
    for entry in ordered:
        dest = dest_root / entry["dest"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        if matches(entry, dest):
            print(f"{entry['dest']}: already in place")
            continue
        if entry.get("source", "") is None:
            note = entry.get("note", "")
            not_made.append(f"{entry['dest']}: not fetchable; ask the maintainers ({note})")
            continue
        try:
            if entry["kind"] == "copy":
                print(f"{entry['dest']}: from {fetch_pinned(entry, dest, base_url, timeout)}")
            elif entry["kind"] == "tar-member":
                print(f"{entry['dest']}: from {fetch_tar_member(entry, dest, base_url, timeout)}")
            elif not convert_pages:
                not_made.append(f"{entry['dest']}: not made (--no-convert)")
            elif latexmlc is None:
                not_made.append(
                    f"{entry['dest']}: not made, because latexmlc is not installed "
                    f"(install Debian's package with `apt-get install {LATEXML_PACKAGE}`)"
                )
            else:
                how = convert(entry, dest_root, dest, base_url, timeout, latexmlc)
                print(f"{entry['dest']}: {how}")
                if "WARNING" in how:
                    differing.append(entry["dest"])
        except FetchError as e:
            failures.append(f"{e}.")
        except NetworkError as e:
            print(str(e), file=sys.stderr)
            return 1
    if not (dest_root / "SOURCES.md").exists():
        (dest_root / "SOURCES.md").write_text(SOURCES_NOTE, encoding="utf-8")
    for line in not_made:
        print(line)
    for line in failures:
        print(line, file=sys.stderr)
    made = len(entries) - len(failures) - len(not_made)
    print(
        f"{dest_root}: {made} of {len(entries)} files in place ({len(differing)} of them regenerated pages that "
        f"differ from the pins), {len(not_made)} not made, {len(failures)} failed."
    )
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dest", type=Path, help="corpus folder to fill (default: $SCIGA_CORPUS, else ../shared/corpus)")
    ap.add_argument(
        "--base-url", default=DEFAULT_BASE_URL, help=f"where files are fetched from (default {DEFAULT_BASE_URL})"
    )
    ap.add_argument("--check", type=Path, metavar="DIR", help="only verify DIR against the pins (exit 0 or 1)")
    ap.add_argument("--no-convert", action="store_true", help="do not run latexmlc; say which pages were not made")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a download may stall (default 60)")
    ap.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    manifest = load_manifest(args.manifest)
    if args.check is not None:
        return check(manifest, args.check)
    return fetch(manifest, args.dest or default_dest(), args.base_url, args.timeout, not args.no_convert)


if __name__ == "__main__":
    sys.exit(main())
