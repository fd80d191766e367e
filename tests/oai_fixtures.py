"""A real OAI-PMH server on 127.0.0.1 serving generated arXiv records, and the same records
as metadata snapshot lines (Kaggle's JSON shape), for the bulk metadata tests and
``bench/oai_pmh.py``.

Records are shaped like arXiv's: new-style ids by first-version month, 1-3 versions with
RFC 2822 dates, TeX accents in some author names (``Bal\\'azs``), a primary category and
cross-lists (``cs.DL astro-ph.IM``), comments naming venues, journal refs, DOIs, licences,
ACM / MSC classes now and then, abstracts of ~1 kB: about 2 kB of ``arXivRaw`` per record.

The server speaks ``ListRecords`` in ``arXivRaw`` and ``arXiv`` formats with ``from`` /
``until`` / ``set``, pages of ``page_size`` records, and resumption tokens that can expire
(``token_ttl`` seconds, ``expire_tokens()``, or a scripted ``expire`` step). Faults are
scripted per request: ``503[:retry_after]``, ``malformed`` (the page cut in half),
``expire`` (``badResumptionToken`` for a request carrying a token), ``ok``. Every
request is logged with its query and status.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape, quoteattr

# -- generated records -----------------------------------------------------------------------------
_FIRST = [
    "Alice",
    "Bo",
    "Chen",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kavya",
    "Liam",
    "Mei",
    "Noah",
    "Olga",
    "Pedro",
    "Qiu",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Yara",
    "Zoe",
]
# (Unicode surname, how arXiv's TeX author field writes it)
_LAST = [
    ("Smith", "Smith"),
    ("Zhang", "Zhang"),
    ("Balázs", r"Bal\'azs"),
    ("Müller", r"M\"uller"),
    ("Erdős", r"Erd\H{o}s"),
    ("García", r"Garc\'ia"),
    ("Nguyen", "Nguyen"),
    ("Øvrebø", r"{\O}vreb{\o}"),
    ("Kowalski", "Kowalski"),
    ("Şimşek", r"\c{S}im\c{s}ek"),
    ("Tanaka", "Tanaka"),
    ("Dvořák", r"Dvo\v{r}\'ak"),
    ("Okafor", "Okafor"),
    ("Ibrahim", "Ibrahim"),
    ("Rossi", "Rossi"),
    ("Lefèvre", r"Lef\`evre"),
    ("Petrov", "Petrov"),
    ("Kim", "Kim"),
    ("Johansson", "Johansson"),
    ("Silva", "Silva"),
]
_WORDS = (
    "learning neural network graph model robust efficient transformer diffusion vision language "
    "segmentation detection sparse adaptive benchmark dataset scalable attention policy reinforcement "
    "optimization federated privacy generative retrieval embedding contrastive multimodal temporal "
    "representation inference probabilistic causal physics simulation image video point cloud"
).split()
_PRIMARY = ["cs.CV", "cs.LG", "cs.CL", "cs.AI", "cs.RO", "cs.IR", "cs.CR", "cs.DL", "cs.HC", "cs.SE"]
_CROSS = ["stat.ML", "eess.IV", "cs.LG", "cs.AI", "math.OC", "astro-ph.IM", "q-bio.QM", "cs.NE"]
_COMMENTS = [
    "Accepted to CVPR 2022. 10 pages, 5 figures",
    "8 pages, 3 figures",
    "ICLR 2023 camera-ready",
    "Accepted at NeurIPS 2021 workshop on Datasets",
    "Submitted to ECCV 2024",
    "Findings of EMNLP 2023",
    "Code available at https://github.com/example/repo",
    "Published in TMLR",
    "12 pages",
]
_LICENSES = [
    "http://creativecommons.org/licenses/by/4.0/",
    "http://arxiv.org/licenses/nonexclusive-distrib/1.0/",
    "http://creativecommons.org/licenses/by-nc-sa/4.0/",
    None,
]
_DOW = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MON = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc(dt: datetime) -> str:
    return f"{_DOW[dt.weekday()]}, {dt.day} {_MON[dt.month - 1]} {dt.year} {dt:%H:%M:%S} GMT"


@dataclass
class Paper:
    id: str
    datestamp: str  # last modification day (the OAI-PMH datestamp)
    versions: list  # [(label, datetime)]
    title: str
    authors: list  # [(keyname unicode, keyname tex, forenames, affiliation or None)]
    categories: str
    abstract: str
    comments: Optional[str] = None
    journal_ref: Optional[str] = None
    doi: Optional[str] = None
    license: Optional[str] = None
    acm_class: Optional[str] = None
    msc_class: Optional[str] = None
    report_no: Optional[str] = None
    submitter: str = "Alice Smith"
    deleted: bool = False  # an OAI-PMH deleted record (header only)

    @property
    def sets(self) -> set:
        out = set()
        for c in self.categories.split():
            arch = c.split(".")[0]
            out.add(
                arch if arch in ("cs", "math", "stat", "eess", "econ", "q-bio", "q-fin", "nlin") else f"physics:{arch}"
            )
        return out


def make_paper(
    i: int,
    *,
    first: Optional[datetime] = None,
    categories: Optional[str] = None,
    datestamp: Optional[str] = None,
    month_seq: Optional[int] = None,
) -> Paper:
    """Record ``i``, deterministic. By default first versions run from 2020-11 on, a few
    hundred per day, and the datestamp is the last version's day."""
    rng = random.Random(i * 7919 + 17)
    if first is None:
        first = datetime(2020, 11, 1, tzinfo=timezone.utc) + timedelta(minutes=7 * i + rng.randrange(0, 7))
    nver = rng.choice((1, 1, 1, 2, 2, 3))
    vers, t = [], first
    for k in range(nver):
        vers.append((f"v{k + 1}", t))
        t = t + timedelta(days=rng.randrange(3, 120), seconds=rng.randrange(86400))
    seq = month_seq if month_seq is not None else i + 1
    pid = f"{first:%y%m}.{seq % 100000:05d}"
    nauth = max(1, min(12, int(rng.gauss(5, 3))))
    authors = []
    for _ in range(nauth):
        last_u, last_t = rng.choice(_LAST)
        aff = rng.choice((None, None, None, "MIT", "ETH Zurich", "University of Tokyo"))
        authors.append((last_u, last_t, rng.choice(_FIRST), aff))
    cats = categories or " ".join(dict.fromkeys([rng.choice(_PRIMARY)] + rng.sample(_CROSS, rng.choice((0, 0, 1, 2)))))
    title = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(6, 14))).capitalize()
    abstract = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(120, 190))).capitalize() + "."
    return Paper(
        id=pid,
        datestamp=datestamp or vers[-1][1].strftime("%Y-%m-%d"),
        versions=vers,
        title=title,
        authors=authors,
        categories=cats,
        abstract=abstract,
        comments=rng.choice(_COMMENTS) if rng.random() < 0.6 else None,
        journal_ref=f"Journal of Examples {rng.randrange(1, 40)} ({first.year})" if rng.random() < 0.1 else None,
        doi=f"10.{rng.randrange(1000, 9999)}/ex.{i}" if rng.random() < 0.15 else None,
        license=rng.choice(_LICENSES),
        acm_class="I.2.6; I.4.8" if rng.random() < 0.03 else None,
        msc_class="68T07, 62H30" if rng.random() < 0.02 else None,
        report_no=f"REP-{i}" if rng.random() < 0.02 else None,
        submitter=f"{authors[0][2]} {authors[0][0]}",
    )


def tex_authors(p: Paper) -> str:
    names = []
    for _, last_t, fore, aff in p.authors:
        names.append(f"{fore} {last_t}" + (f" ({aff})" if aff else ""))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _el(name: str, value: Optional[str]) -> str:
    return f"<{name}>{escape(value)}</{name}>" if value else ""


def raw_xml(p: Paper) -> str:
    vers = "".join(
        f'<version version="{v}"><date>{rfc(t)}</date><size>{200 + len(p.title)}kb</size>'
        f"<source_type>D</source_type></version>"
        for v, t in p.versions
    )
    return (
        f'<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="http://arxiv.org/OAI/arXivRaw/ http://arxiv.org/OAI/arXivRaw.xsd">'
        f"<id>{p.id}</id><submitter>{escape(p.submitter)}</submitter>{vers}"
        f"<title>{escape(p.title)}</title><authors>{escape(tex_authors(p))}</authors>"
        f"<categories>{p.categories}</categories>{_el('comments', p.comments)}{_el('report-no', p.report_no)}"
        f"{_el('msc-class', p.msc_class)}{_el('acm-class', p.acm_class)}{_el('journal-ref', p.journal_ref)}"
        f"{_el('doi', p.doi)}{_el('license', p.license)}<abstract>  {escape(p.abstract)}\n</abstract></arXivRaw>"
    )


def arxiv_xml(p: Paper) -> str:
    authors = "".join(
        f"<author><keyname>{escape(u)}</keyname><forenames>{escape(f)}</forenames>"
        + (f"<affiliation>{escape(a)}</affiliation>" if a else "")
        + "</author>"
        for u, _, f, a in p.authors
    )
    updated = f"<updated>{p.versions[-1][1]:%Y-%m-%d}</updated>" if len(p.versions) > 1 else ""
    return (
        f'<arXiv xmlns="http://arxiv.org/OAI/arXiv/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
        f"<id>{p.id}</id><created>{p.versions[0][1]:%Y-%m-%d}</created>{updated}<authors>{authors}</authors>"
        f"<title>{escape(p.title)}</title><categories>{p.categories}</categories>{_el('comments', p.comments)}"
        f"{_el('report-no', p.report_no)}{_el('msc-class', p.msc_class)}{_el('acm-class', p.acm_class)}"
        f"{_el('journal-ref', p.journal_ref)}{_el('doi', p.doi)}{_el('license', p.license)}"
        f"<abstract>{escape(p.abstract)}</abstract></arXiv>"
    )


def record_xml(p: Paper, prefix: str) -> str:
    sets = "".join(f"<setSpec>{s}</setSpec>" for s in sorted(p.sets))
    if p.deleted:
        return (
            f'<record><header status="deleted"><identifier>oai:arXiv.org:{p.id}</identifier>'
            f"<datestamp>{p.datestamp}</datestamp>{sets}</header></record>\n"
        )
    body = raw_xml(p) if prefix == "arXivRaw" else arxiv_xml(p)
    return (
        f"<record><header><identifier>oai:arXiv.org:{p.id}</identifier><datestamp>{p.datestamp}</datestamp>"
        f"{sets}</header><metadata>{body}</metadata></record>\n"
    )


def snapshot_obj(p: Paper) -> dict:
    """The Kaggle snapshot's shape (TeX author string, Unicode ``authors_parsed``)."""
    return {
        "id": p.id,
        "submitter": p.submitter,
        "authors": tex_authors(p),
        "title": p.title,
        "comments": p.comments,
        "journal-ref": p.journal_ref,
        "doi": p.doi,
        "report-no": p.report_no,
        "categories": p.categories,
        "license": p.license,
        "abstract": "  " + p.abstract + "\n",
        "versions": [{"version": v, "created": rfc(t)} for v, t in p.versions],
        "update_date": p.datestamp,
        "authors_parsed": [[u, f, ""] + ([a] if a else []) for u, _, f, a in p.authors],
    }


# -- stores --------------------------------------------------------------------------------------
class ListStore:
    """Papers held in a list ordered by (datestamp, id); ``put`` adds or modifies one."""

    def __init__(self, papers=()):
        self.lock = threading.Lock()
        self.by_id: dict[str, Paper] = {}
        self.keys: dict[str, tuple[str, str]] = {}
        self.order: list[tuple[str, str]] = []
        for p in papers:
            self.put(p)

    def put(self, p: Paper) -> None:
        """Add ``p``, or re-file it after its datestamp changed."""
        with self.lock:
            old = self.keys.get(p.id)
            if old is not None:
                self.order.remove(old)
            self.by_id[p.id] = p
            self.keys[p.id] = (p.datestamp, p.id)
            bisect.insort(self.order, self.keys[p.id])

    def window(self, from_: Optional[str], until: Optional[str], set_: Optional[str]) -> list:
        with self.lock:
            lo = bisect.bisect_left(self.order, (from_ or "",))
            hi = bisect.bisect_right(self.order, (until or "9999", "\uffff"))
            keys = self.order[lo:hi]
            return [self.by_id[i] for _, i in keys if not set_ or set_ in self.by_id[i].sets]


class GeneratedStore:
    """``n`` generated cs papers, made on demand (the server's memory does not grow with n);
    datestamps rise with the index, a few hundred records per day."""

    def __init__(self, n: int):
        self.n = n

    def _stamp(self, i: int) -> str:
        return (date(2021, 1, 1) + timedelta(days=i // 300)).isoformat()

    def window(self, from_, until, set_):
        if set_ and set_ != "cs":
            return _Lazy(self, 0, 0)

        class _Stamps:
            def __len__(s):
                return self.n

            def __getitem__(s, i):
                return self._stamp(i)

        lo = bisect.bisect_left(_Stamps(), from_) if from_ else 0
        hi = bisect.bisect_right(_Stamps(), until) if until else self.n
        return _Lazy(self, lo, hi)

    def paper(self, i: int) -> Paper:
        # Every ninth paper gets random cross-lists, the others one cs category.
        return make_paper(i, categories=_PRIMARY[i % len(_PRIMARY)] if i % 9 else None, datestamp=self._stamp(i))


class _Lazy:
    def __init__(self, store: GeneratedStore, lo: int, hi: int):
        self.store, self.lo, self.hi = store, lo, hi

    def __len__(self):
        return max(0, self.hi - self.lo)

    def __getitem__(self, k):
        if isinstance(k, slice):
            start, stop, _ = k.indices(len(self))
            return [self.store.paper(self.lo + j) for j in range(start, stop)]
        return self.store.paper(self.lo + k)


# -- the server ------------------------------------------------------------------------------------
class OaiServer:
    def __init__(
        self,
        store,
        *,
        page_size: int = 100,
        token_ttl: Optional[float] = None,
        delay: float = 0.0,
        cache_pages: bool = False,
    ):
        self.store = store
        self.pages: Optional[dict] = {} if cache_pages else None  # rendered records by request (benchmarks)
        self.page_size = page_size
        self.token_ttl = token_ttl
        self.delay = delay
        self.generation = 0
        self.log: list[dict] = []
        self.steps: list[str] = []
        self.lock = threading.Lock()
        self.fail_any = False  # --plan tests: any request is a failure
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/oai"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> OaiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def script(self, steps: list[str]) -> None:
        with self.lock:
            self.steps.extend(steps)

    def expire_tokens(self) -> None:
        self.generation += 1

    def _next_step(self) -> str:
        with self.lock:
            return self.steps.pop(0) if self.steps else "ok"

    # -- protocol ---------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        u = urlsplit(h.path)
        q = {k: v[0] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        entry = {"path": u.path, "query": q, "t": time.time()}
        with self.lock:
            self.log.append(entry)
        if self.delay:
            time.sleep(self.delay)
        step = self._next_step()
        if step.startswith("503"):
            ra = step.split(":", 1)[1] if ":" in step else "0"
            entry["status"] = 503
            return self._send(h, 503, b"<html>busy</html>", {"Retry-After": ra})
        if q.get("verb") != "ListRecords":
            return self._answer(h, entry, q, error=("badVerb", "only ListRecords here"))
        if "resumptionToken" in q:
            tok = q["resumptionToken"]
            parsed = self._parse_token(tok)
            if step == "expire" or parsed is None:
                return self._answer(
                    h,
                    entry,
                    q,
                    error=("badResumptionToken", "The value of the resumptionToken argument is invalid or expired."),
                )
            prefix, set_, from_, until, offset = parsed
        else:
            prefix = q.get("metadataPrefix")
            if prefix not in ("arXivRaw", "arXiv"):
                return self._answer(h, entry, q, error=("cannotDisseminateFormat", f"format {prefix} not supported"))
            set_, from_, until, offset = q.get("set") or None, q.get("from") or None, q.get("until") or None, 0
            if from_ and until and from_ > until:
                return self._answer(h, entry, q, error=("badArgument", "from is after until"))
        items = self.store.window(from_, until, set_)
        total = len(items)
        if total == 0:
            return self._answer(h, entry, q, error=("noRecordsMatch", "no records"))
        body, n = self.render(items, prefix, set_, from_, until, offset)
        nxt = offset + n
        if nxt < total:
            tok = f"{self.generation}|{time.time():.3f}|{prefix}|{set_ or ''}|{from_ or ''}|{until or ''}|{nxt}"
            tok_xml = f'<resumptionToken cursor="{offset}" completeListSize="{total}">{escape(tok)}</resumptionToken>'
        else:
            tok_xml = f'<resumptionToken cursor="{offset}" completeListSize="{total}"/>'
        doc = self._doc(q, f"<ListRecords>\n{body}{tok_xml}\n</ListRecords>").encode("utf-8")
        if step == "malformed":
            doc = doc[: len(doc) // 2]
        entry["status"] = 200
        entry["records"] = n
        self._send(h, 200, doc, {"Content-Type": "text/xml; charset=utf-8"})

    def render(self, items, prefix, set_, from_, until, offset) -> tuple[str, int]:
        """The records of one page as XML text, and how many."""
        key = (prefix, set_, from_, until, offset)
        if self.pages is not None and key in self.pages:
            return self.pages[key]
        page = items[offset : offset + self.page_size]
        out = ("".join(record_xml(p, prefix) for p in page), len(page))
        if self.pages is not None:
            self.pages[key] = out
        return out

    def _parse_token(self, tok: str):
        try:
            gen, issued, prefix, set_, from_, until, offset = tok.split("|")
            gen_i, issued_f, off = int(gen), float(issued), int(offset)
        except ValueError:
            return None
        if gen_i != self.generation:
            return None
        if self.token_ttl is not None and time.time() - issued_f > self.token_ttl:
            return None
        return prefix, set_ or None, from_ or None, until or None, off

    def _doc(self, q: dict, inner: str) -> str:
        attrs = "".join(f" {k}={quoteattr(v)}" for k, v in sorted(q.items()))
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.openarchives.org/OAI/2.0/ '
            'http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd">\n'
            f"<responseDate>{now}</responseDate>\n<request{attrs}>{escape(self.url)}</request>\n{inner}\n</OAI-PMH>\n"
        )

    def _answer(self, h, entry: dict, q: dict, error: tuple) -> None:
        code, msg = error
        entry["status"] = 200
        entry["error"] = code
        doc = self._doc(q, f'<error code="{code}">{escape(msg)}</error>').encode("utf-8")
        self._send(h, 200, doc, {"Content-Type": "text/xml; charset=utf-8"})

    def _send(self, h, status: int, body: bytes, headers: dict) -> None:
        try:
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
