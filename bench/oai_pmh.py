"""Benchmark of the OAI-PMH harvest: parsing speed and bounded memory.

A loopback OAI-PMH server (tests/oai_fixtures.py, in its own process, pages rendered
before the clock starts) serves generated arXivRaw records shaped like arXiv's (~2.7 kB
each, 1,000 per page as arXiv sends them). Measured in the same run:

1. Parsing, in process, on the same pages: records/s for
   - ours: ``ListRecordsPage`` (lxml ``iterparse``, each record handled and freed when its
     end tag is read), and ours + mapping to the sidecar dict (``select_item``);
   - baseline: what sickle / oaipmh-scythe do, a full DOM per page (``etree.XML``) and a
     generic ``xml_to_dict`` per record, then the same mapping.
2. Whole harvests (``OaiHarvester``: HTTP on 127.0.0.1 with no rate limit; every record
   parsed, a category selection keeping about 1 in 5, whose ``<id>.meta.json`` is written
   into a fresh cache) of a small and a large harvest, ours and the full-DOM baseline,
   each in its own process; peak RSS of that process tree sampled with psutil every
   20 ms. Bounded memory: the large harvest's peak is about the small one's.

Run:  python bench/oai_pmh.py [--records 150000] [--small 15000] [--parse-pages 30] [--category cs.CV,cs.CL]
Prints a Markdown table; docs/explanation/benchmarks.md keeps the measured one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lxml import etree

from sciga.transforms.metadata.corpus_selection import Selection
from sciga.transforms.metadata.oai_pmh import (
    OAI_NS,
    ListRecordsPage,
    OaiHarvester,
    OaiHarvestOptions,
    OaiItem,
    select_item,
)

from tests.oai_fixtures import GeneratedStore, OaiServer


# -- the baseline: full DOM per page, generic dict per record (sickle / oaipmh-scythe) -----------
def xml_to_dict(tree) -> dict:
    """sickle's ``xml_to_dict(strip_ns=True)``: every element below -> {local name: [texts]}."""
    fields = defaultdict(list)
    for el in tree.iter():
        if not isinstance(el.tag, str):
            continue
        fields[etree.QName(el).localname].append(el.text)
    return fields


class DomPage:
    """The ``ListRecordsPage`` interface, built the baseline way."""

    def __init__(self, body: bytes, prefix: str):
        self.body, self.prefix = body, prefix
        self.token = self.cursor = self.complete_list_size = self.error_code = self.error_message = None
        self.response_date = None

    def items(self):
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        root = etree.XML(self.body, parser)
        ns = {"oai": OAI_NS}
        err = root.find("oai:error", ns)
        if err is not None:
            self.error_code, self.error_message = err.get("code"), err.text
        self.response_date = root.findtext("oai:responseDate", namespaces=ns)
        tok = root.find(".//oai:resumptionToken", ns)
        if tok is not None:
            self.token = (tok.text or "").strip() or None
            self.complete_list_size = int(tok.get("completeListSize") or 0)
        for rec in root.xpath(".//oai:record", namespaces=ns):
            header = rec.find("oai:header", ns)
            item = OaiItem(
                identifier=header.findtext("oai:identifier", namespaces=ns) or "",
                datestamp=header.findtext("oai:datestamp", namespaces=ns) or "",
                deleted=header.get("status") == "deleted",
            )
            md = rec.find("oai:metadata", ns)
            if md is not None and len(md):
                d = xml_to_dict(md[0])
                f = {k: v[0] for k, v in d.items()}
                f["versions"] = [(f"v{k + 1}", t) for k, t in enumerate(d.get("date", []))]
                item.fields = f
            yield item


SELECT = "cs.CV,cs.CL"  # about 1 generated record in 5


# -- server and harvest processes ------------------------------------------------------------------
def serve(args) -> None:
    srv = OaiServer(GeneratedStore(args.records), page_size=args.page_size, cache_pages=True)
    items = srv.store.window(None, None, None)
    for off in range(0, len(items), args.page_size):  # render every page before the clock starts
        srv.render(items, "arXivRaw", None, None, None, off)
    with srv:
        Path(args.port_file).write_text(srv.url)
        while True:
            time.sleep(3600)


def harvest(args) -> None:
    from sciga.transforms.fetch.http_client import PoliteClient
    from sciga.transforms.metadata.cache_sink import open_for_import

    cache = open_for_import(args.out)
    http = PoliteClient(0.0, max_retries=2, read_timeout=120)
    reader = DomPage if args.impl == "dom" else ListRecordsPage
    sel = Selection(categories=tuple(args.category.split(",")))
    h = OaiHarvester(
        OaiHarvestOptions(url=args.url, metadata_prefix="arXivRaw", selection=sel), http, cache, page_reader=reader
    )
    t0 = time.perf_counter()
    rep = h.run()
    dt = time.perf_counter() - t0
    Path(args.result).write_text(
        json.dumps(
            {"records": rep.read, "written": rep.new, "seconds": dt, "requests": rep.requests, "stopped": rep.stopped}
        )
    )


def start_server(records: int, page_size: int) -> tuple[subprocess.Popen, str]:
    port_file = tempfile.mktemp(prefix="oai-bench-port-")
    p = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "serve",
            "--records",
            str(records),
            "--page-size",
            str(page_size),
            "--port-file",
            port_file,
        ],
        cwd=ROOT,
    )
    t0 = time.time()
    while not os.path.exists(port_file) or not Path(port_file).read_text():
        if p.poll() is not None or time.time() - t0 > 900:
            raise SystemExit("the benchmark server did not start")
        time.sleep(0.2)
    time.sleep(0.2)
    return p, Path(port_file).read_text()


def run_harvest(url: str, impl: str, category: str) -> dict:
    import psutil

    out = tempfile.mkdtemp(prefix=f"oai-bench-{impl}-")
    result = out + ".json"
    p = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "harvest",
            "--url",
            url,
            "--impl",
            impl,
            "--out",
            out,
            "--result",
            result,
            "--category",
            category,
        ],
        cwd=ROOT,
    )
    peak = [0]
    done = threading.Event()

    def watch():
        proc = psutil.Process(p.pid)
        while not done.is_set():
            try:
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                peak[0] = max(peak[0], rss)
            except psutil.Error:
                pass
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    rc = p.wait()
    done.set()
    t.join()
    if rc != 0:
        raise SystemExit(f"harvest {impl} failed (exit {rc})")
    r = json.loads(Path(result).read_text())
    r["peak_rss"] = peak[0]
    shutil.rmtree(out, ignore_errors=True)
    os.unlink(result)
    return r


# -- parsing in process ----------------------------------------------------------------------------
def parse_bench(pages: list[bytes], repeat: int) -> dict:
    sel = Selection()

    def ours_parse():
        n = 0
        for b in pages:
            for _ in ListRecordsPage(b, "arXivRaw").items():
                n += 1
        return n

    def ours_map():
        n = 0
        for b in pages:
            for it in ListRecordsPage(b, "arXivRaw").items():
                n += select_item(it, "arXivRaw", sel) is not None
        return n

    def dom_parse():
        n = 0
        for b in pages:
            for _ in DomPage(b, "arXivRaw").items():
                n += 1
        return n

    def dom_map():
        n = 0
        for b in pages:
            for it in DomPage(b, "arXivRaw").items():
                n += select_item(it, "arXivRaw", sel) is not None
        return n

    out = {}
    for name, fn in (
        ("ours_parse", ours_parse),
        ("dom_parse", dom_parse),
        ("ours_map", ours_map),
        ("dom_map", dom_map),
    ):
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            n = fn()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        out[name] = n / best
    return out


def page_bytes(records: int, page_size: int) -> list[bytes]:
    srv = OaiServer(GeneratedStore(records), page_size=page_size)
    items = srv.store.window(None, None, None)
    pages = []
    for off in range(0, len(items), page_size):
        body, _ = srv.render(items, "arXivRaw", None, None, None, off)
        pages.append(
            srv._doc(
                {"verb": "ListRecords", "metadataPrefix": "arXivRaw"},
                f'<ListRecords>\n{body}<resumptionToken cursor="{off}">t{off}</resumptionToken>\n</ListRecords>',
            ).encode("utf-8")
        )
    srv.httpd.server_close()
    return pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("serve")
    s.add_argument("--records", type=int, required=True)
    s.add_argument("--page-size", type=int, default=1000)
    s.add_argument("--port-file", required=True)
    h = sub.add_parser("harvest")
    h.add_argument("--url", required=True)
    h.add_argument("--impl", choices=("ours", "dom"), required=True)
    h.add_argument("--out", required=True)
    h.add_argument("--result", required=True)
    h.add_argument("--category", default=SELECT)
    ap.add_argument("--records", type=int, default=150000, help="records of the large harvest")
    ap.add_argument("--small", type=int, default=15000, help="records of the small harvest")
    ap.add_argument("--page-size", type=int, default=1000)
    ap.add_argument("--parse-pages", type=int, default=30, help="pages for the in-process parsing measurement")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-harvest", action="store_true", help="parsing only")
    ap.add_argument("--category", default=SELECT, help="selection of the whole harvests (comma list)")
    args = ap.parse_args()
    if args.cmd == "serve":
        return serve(args)
    if args.cmd == "harvest":
        return harvest(args)

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    pages = page_bytes(args.parse_pages * args.page_size, args.page_size)
    nrec = args.parse_pages * args.page_size
    size = sum(len(b) for b in pages)
    print(
        f"\nparsing {nrec:,} records in {len(pages)} pages ({size / nrec:.0f} bytes per record), best of {args.repeat}\n"
    )
    r = parse_bench(pages, args.repeat)
    print("| step | ours: iterparse, record by record | baseline: full DOM + xml_to_dict | ours / baseline |")
    print("|---|---:|---:|---:|")
    print(
        f"| parse | {r['ours_parse']:,.0f} records/s | {r['dom_parse']:,.0f} records/s | {r['ours_parse'] / r['dom_parse']:.2f}x |"
    )
    print(
        f"| parse + map to `<id>.meta.json` dict | {r['ours_map']:,.0f} records/s | {r['dom_map']:,.0f} records/s | "
        f"{r['ours_map'] / r['dom_map']:.2f}x |"
    )
    if args.skip_harvest:
        return
    print(
        f"\nwhole harvests over HTTP on 127.0.0.1 (no rate limit), --category {args.category} written to a fresh cache\n"
    )
    print(
        "| harvest | selected and written | ours: records/s | ours: peak RSS | baseline: records/s | baseline: peak RSS |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for n in (args.small, args.records):
        srv, url = start_server(n, args.page_size)
        try:
            res = {impl: run_harvest(url, impl, args.category) for impl in ("ours", "dom")}
        finally:
            srv.terminate()
            srv.wait()
        o, d = res["ours"], res["dom"]
        assert o["records"] == n == d["records"] and o["written"] == d["written"], (o, d)
        print(
            f"| {n:,} records | {o['written']:,} | {n / o['seconds']:,.0f} | {o['peak_rss'] / 2**20:,.0f} MiB | "
            f"{n / d['seconds']:,.0f} | {d['peak_rss'] / 2**20:,.0f} MiB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
