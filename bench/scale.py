"""How `sciga build` scales: wall time, ms/paper, images/s and peak memory (RSS summed over
the whole process tree, sampled with psutil) at several corpus sizes, against a one-core
floor measured on the same papers in the same run.

The floor does the least any builder must do, in one process on one core: parse each page
with lxml, read every image, decode it once with Pillow, and stream rows into one zstd
Parquet file. The build does everything else too (metadata, sections, tokens, linking with
sentences, TeX checks, keyword filter, perceptual hashes, dedupe, sharding, manifest).

Corpora (distinct ids, made in --workdir, reused between runs):
- image-rich: a real LaTeXML conversion of a TeX paper with --figures figures (generated
  raster figures, ~--image-kb each), replicated, figure files hard-linked per paper;
- text: copies of the real pages in ../shared/corpus/html and latexml, each with its own id.

    python bench/scale.py                      # the table in docs/explanation/benchmarks.md (about an hour here)
    python bench/scale.py --quick              # minutes: small sizes, same columns
    python bench/scale.py --image-sizes 200 2000 --text-sizes 2000 20000 --incremental 2000

Goals: peak RSS flat in corpus size (within 25% from 200 to
2,000 image-rich papers) and at most 2 GB there, at most 1.5 GB for 20,000 text papers;
wall time with all cores at most 1.5x the one-core floor; 2 workers at least 1.7x faster
than 1 on 2 cores; a rebuild with 1% of the inputs changed at most 10% of a clean build,
with byte-identical shards.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.paths import corpus_dir


def checkout_env() -> dict:
    """The environment a benchmarked command runs in: this checkout's code first."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB of the process tree, stdout)."""
    import psutil

    e = checkout_env()
    e.update(env or {})
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=str(ROOT), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = psutil.Process(p.pid)
    peak = 0
    while p.poll() is None:
        total = 0
        try:
            procs = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            procs = [proc]
        for q in procs:
            try:
                total += q.memory_info().rss
            except psutil.Error:
                pass
        peak = max(peak, total)
        time.sleep(0.1)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err.decode()[-3000:]}")
    return wall, peak / 2**20, out.decode()


# ------------------------------------------------------------------ the floor


def floor(pages_dir: str, out: str) -> dict:
    """Parse + read + decode + streaming write, one process, one core."""
    import lxml.html
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    schema = pa.schema(
        [
            ("paper_id", pa.string()),
            ("path", pa.string()),
            ("image", pa.binary()),
            ("width", pa.int32()),
            ("height", pa.int32()),
        ]
    )
    writer = pq.ParquetWriter(out, schema, compression="zstd")
    papers = images = 0
    batch: list[dict] = []
    for page in sorted(Path(pages_dir).rglob("*.html")):
        root = lxml.html.fromstring(page.read_bytes())
        papers += 1
        for img in root.iter("img"):
            src = img.get("src")
            if not src:
                continue
            f = page.parent / src
            if not f.is_file():
                continue
            data = f.read_bytes()
            with Image.open(io.BytesIO(data)) as im:
                rgb = im.convert("RGB")
                rgb.load()
                w, h = rgb.size
            images += 1
            batch.append({"paper_id": page.stem, "path": src, "image": data, "width": w, "height": h})
            if len(batch) >= 256:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
    if batch:
        writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    writer.close()
    return {"papers": papers, "images": images}


# ------------------------------------------------------------------ corpora


def image_corpus(workdir: Path, n: int, figures: int, image_kb: int) -> Path:
    from sciga.samples.scale_corpus import image_rich_html, latexml_image_rich_page, make_image_rich_corpus

    d = workdir / f"image_{figures}x{image_kb}kb_{n}"
    if (d / ".done").exists():
        return d
    tpl = latexml_image_rich_page(workdir / "latexml_template", figures, image_kb)
    if tpl is None:
        print("  (latexmlc not installed: using a generated LaTeXML-shaped page)", file=sys.stderr)
        tpl = image_rich_html("2601.00000", figures)
    make_image_rich_corpus(d, n, n_figures=figures, image_kb=image_kb, distinct_images=8, template=tpl)
    (d / ".done").write_text("ok")
    return d


def text_corpus(workdir: Path, n: int) -> Path:
    from sciga.samples.scale_corpus import make_text_corpus

    d = workdir / f"text_{n}"
    if (d / ".done").exists():
        return d
    c = corpus_dir()
    sources = sorted((c / "html").glob("*.html")) + sorted((c / "latexml").glob("*.html"))
    make_text_corpus(d, n, sources)
    (d / ".done").write_text("ok")
    return d


def cpu_timeline(cmd: list[str], every: float = 1.0) -> tuple[float, list[tuple[float, float, float, int]]]:
    """(wall, rows of (second, launcher CPU %, workers' CPU %, worker processes)) of a command:
    where a multi-worker build loses its second core (start-up, a stage that runs in one
    process, the launcher shuttling data between stages)."""
    import psutil

    e = checkout_env()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=str(ROOT), env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    top = psutil.Process(p.pid)
    seen: dict[int, float] = {}  # pid -> CPU seconds at the last sample
    rows = []
    while p.poll() is None:
        time.sleep(every)
        launcher = workers = 0.0
        n = 0
        try:
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            continue
        for q in procs:
            try:
                t = q.cpu_times()
            except psutil.Error:
                continue
            total = t.user + t.system
            delta, seen[q.pid] = total - seen.get(q.pid, 0.0), total
            if q.pid == p.pid:
                launcher += delta
            else:
                workers += delta
                n += 1
        rows.append((time.perf_counter() - t0, 100 * launcher / every, 100 * workers / every, n))
    return time.perf_counter() - t0, rows


def real_figure_corpus(workdir: Path, copies: int) -> Path:
    """Real papers with their real figures, ``copies`` times (distinct ids, files hard-linked):
    the LaTeXML pages of ../shared/corpus/latexml whose TeX trees are in ../shared/corpus/tex
    (dd3d: its PNG figures; eml and a1709: their PDF figures rasterized the way the build
    rasterizes a TeX figure, at its DPI) and the embedded sample's four papers with their
    figures. (The corpus has no real JPEG figure; JPEG cost is in bench/decode.py.)"""
    import tarfile

    from sciga.samples import sample_dir
    from sciga.samples.scale_corpus import _link_or_copy, paper_ids
    from sciga.transforms.eprints.rasterize import pdf_to_png

    d = workdir / f"real_figures_{copies}"
    if (d / ".done").exists():
        return d
    c = corpus_dir()
    src = workdir / "real_figure_sources"
    made = src / "made"
    made.mkdir(parents=True, exist_ok=True)
    with tarfile.open(c / "tex" / "1709.07020" / "1709.07020v1.tar.gz") as tf:
        inset = tf.extractfile("preprint_inset.pdf").read()
    rasters = {
        "eml": {
            "x1.png": (c / "tex" / "2603.21852" / "Fig1_graph_spiral.pdf").read_bytes(),
            "x2.png": (c / "tex" / "2603.21852" / "Fig2_trees.pdf").read_bytes(),
        },
        "a1709": {"x1.png": inset},
    }
    papers: list[tuple[Path, dict[str, Path]]] = []
    for name, files in rasters.items():
        out = {}
        for rel, pdf in files.items():
            f = made / name / rel
            if not f.exists():
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_bytes(pdf_to_png(pdf, f"{name}/{rel}"))
            out[rel] = f
        papers.append((c / "latexml" / f"{name}.html", out))
    dd3d = c / "tex" / "dd3d"
    papers.append((c / "latexml" / "dd3d.html", {str(p.relative_to(dd3d)): p for p in dd3d.rglob("*.png")}))
    for page in sorted(Path(sample_dir()).glob("*/*.html")):
        papers.append(
            (page, {str(p.relative_to(page.parent)): p for p in page.parent.rglob("*") if p.is_file() and p != page})
        )
    for i, pid in enumerate(paper_ids(copies * len(papers), "2603")):
        page, files = papers[i % len(papers)]
        folder = d / pid
        folder.mkdir(parents=True, exist_ok=True)
        _link_or_copy(page, folder / f"{pid}.html")
        for rel, f in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(f, folder / rel)
    (d / ".done").write_text("ok")
    return d


def cpu_seconds_tree(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU seconds of the process and its children) of a command (resource usage)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    e = checkout_env()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=str(ROOT), env=e, capture_output=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stderr.decode()[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def lxml_floor(pages: Path, cut: bool = False) -> float:
    """Seconds to parse every page with lxml in one process (the least a text build does),
    the best of three runs, as the builds it is the baseline of. ``cut``: each page's
    formulas' bodies cut out first, as the build parses it (``parse/math_bodies.py``)."""
    # The floor itself imports nothing of sciga: its time is lxml's alone.
    cutter = "from sciga.transforms.parse.math_bodies import without_math_bodies\n" if cut else ""
    page = "without_math_bodies(p.read_bytes())" if cut else "p.read_bytes()"
    code = (
        "import sys, pathlib, lxml.html\n" + cutter + "for p in sorted(pathlib.Path(sys.argv[1]).rglob('*.html')):\n"
        f"    lxml.html.fromstring({page})\n"
    )
    return min(cpu_seconds_tree([sys.executable, "-c", code, str(pages)])[0] for _ in range(3))


def start_up_rows(workdir: Path, text_n: int, n_all: int) -> list[tuple]:
    """The issue-26 rows: `sciga --help` vs a bare interpreter; an unchanged rebuild, a 1%
    rebuild and 1 vs n workers on ``text_n`` real text pages; the text build vs lxml."""
    rows = []
    bare = min(cpu_seconds_tree([sys.executable, "-c", "pass"])[0] for _ in range(3))
    helps = min(cpu_seconds_tree([sys.executable, "-m", "sciga", "--help"])[0] for _ in range(3))
    rows.append(
        (
            "`sciga --help`",
            f"{helps:.2f} s",
            "bare `python -c pass`",
            f"{bare:.2f} s",
            f"{helps / bare:.1f}x",
            "< 0.5 s",
        )
    )
    pages = text_corpus(workdir, text_n)
    outs = {}
    # Best of three clean builds each, alternating: on a shared (virtual) machine one build's
    # wall time moves by up to 20% between runs (14.0 and 16.4 s in one run of this table),
    # which a ratio of two single runs doubles.
    for _ in range(3):
        for w in sorted({1, n_all}):
            out = workdir / f"out_start_{text_n}_w{w}"
            shutil.rmtree(out, ignore_errors=True)
            got = build(pages, out, w)
            if w not in outs or got["wall"] < outs[w]["wall"]:
                outs[w] = got
    if n_all != 1:
        same = digests(workdir / f"out_start_{text_n}_w1") == digests(workdir / f"out_start_{text_n}_w{n_all}")
        rows.append(
            (
                f"clean build, {text_n} text pages, --workers {n_all}",
                f"{outs[n_all]['wall']:.1f} s",
                "--workers 1",
                f"{outs[1]['wall']:.1f} s",
                f"{outs[1]['wall'] / outs[n_all]['wall']:.2f}x faster (same bytes: {same})",
                ">= 1.8x",
            )
        )
    floor_s = lxml_floor(pages)
    rows.append(
        (
            f"clean build, {text_n} text pages, --workers {n_all}",
            f"{outs[n_all]['wall']:.1f} s",
            "lxml parse of the same pages, 1 core",
            f"{floor_s:.1f} s",
            f"{outs[n_all]['wall'] / floor_s:.2f}x",
            "<= 1.5x",
        )
    )
    cut_s = lxml_floor(pages, cut=True)
    rows.append(
        (
            "lxml parse of the same pages, formulas' bodies cut first (as the build parses them), 1 core",
            f"{cut_s:.1f} s",
            "lxml parse of the whole pages, 1 core",
            f"{floor_s:.1f} s",
            f"{cut_s / floor_s:.2f}x",
            "",
        )
    )
    # The same clean build on Beam's DirectRunner, what every local build ran on before the
    # builds without Beam took over (``sciga/executors/in_process.py``).
    beam_out = workdir / f"out_start_{text_n}_beam"
    shutil.rmtree(beam_out, ignore_errors=True)
    on_beam = build(pages, beam_out, n_all, env={"SCIGA_IN_PROCESS": "0"})
    rows.append(
        (
            f"the same clean build on {on_beam['runner']} (SCIGA_IN_PROCESS=0), --workers {n_all}",
            f"{on_beam['wall']:.1f} s",
            f"the clean build above ({outs[n_all]['runner']})",
            f"{outs[n_all]['wall']:.1f} s",
            f"{on_beam['wall'] / outs[n_all]['wall']:.2f}x "
            f"(same bytes: {digests(beam_out) == digests(workdir / f'out_start_{text_n}_w{n_all}')})",
            "",
        )
    )
    shutil.rmtree(beam_out, ignore_errors=True)
    out = workdir / f"out_start_{text_n}_w{n_all}"
    nothing = min(build(pages, out, n_all)["wall"] for _ in range(3))
    rows.append(
        (
            f"unchanged rebuild, {text_n} text pages",
            f"{nothing:.2f} s",
            "the clean build",
            f"{outs[n_all]['wall']:.1f} s",
            f"{nothing / outs[n_all]['wall']:.3f}",
            "<= 2 s",
        )
    )
    work = workdir / f"inc_text_{text_n}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pages, work, copy_function=os.link)
    inc_out = workdir / "inc_text_out"
    shutil.rmtree(inc_out, ignore_errors=True)
    clean = build(work, inc_out, None)  # the defaults, as a user runs it
    on_beam = workdir / "inc_text_out_beam"  # the same rebuild on Beam, from the same start
    shutil.rmtree(on_beam, ignore_errors=True)
    shutil.copytree(inc_out, on_beam)
    changed = max(1, text_n // 100)
    for page in sorted(work.glob("*.html"))[:changed]:
        text = page.read_text(encoding="utf-8")
        page.unlink()  # hard link: write a new file, leave the corpus alone
        page.write_text(text.replace("</body>", "<p>An added paragraph.</p></body>", 1), encoding="utf-8")
    # Best of three rebuilds from the same start (a single one moves by 20% and more here),
    # against the best clean build of these pages with the same workers.
    start = workdir / "inc_text_out_start"
    shutil.rmtree(start, ignore_errors=True)
    shutil.copytree(inc_out, start)
    runs = []
    for _ in range(3):
        shutil.rmtree(inc_out, ignore_errors=True)
        shutil.copytree(start, inc_out)
        runs.append(build(work, inc_out, None))
    again = min(runs, key=lambda r: r["wall"])
    walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
    shutil.rmtree(start, ignore_errors=True)
    beam_again = build(work, on_beam, None, env={"SCIGA_IN_PROCESS": "0"})
    clean_wall = min(clean["wall"], outs[n_all]["wall"])
    rows.append(
        (
            f"{changed} of {text_n} text pages changed ({again['reused']} reused; defaults: {again['runner']}; "
            f"best of {len(runs)}: {walls} s)",
            f"{again['wall']:.1f} s",
            "clean build of the same pages (best of the clean builds above)",
            f"{clean_wall:.1f} s",
            f"{again['wall'] / clean_wall:.3f}",
            "<= 0.15",
        )
    )
    rows.append(
        (
            f"the same rebuild, {beam_again['runner']} (SCIGA_IN_PROCESS=0)",
            f"{beam_again['wall']:.1f} s",
            f"the rebuild above ({again['runner']})",
            f"{again['wall']:.1f} s",
            f"{beam_again['wall'] / again['wall']:.2f}x (same bytes: {digests(on_beam) == digests(inc_out)})",
            "",
        )
    )
    shutil.rmtree(on_beam, ignore_errors=True)
    for w in outs:
        shutil.rmtree(workdir / f"out_start_{text_n}_w{w}", ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(inc_out, ignore_errors=True)
    return rows


PEAK_RSS_MB: list[float] = []  # of every build this run made


def build(pages: Path, out: Path, workers: int | None, extra: list[str] | None = None, env: dict | None = None) -> dict:
    """`sciga build`; ``workers`` None: the default (a few inputs to compute: in this process,
    without Beam; more: every core, one worker per input to compute)."""
    cmd = [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(out), "--quiet"]
    cmd += ["--workers", str(workers)] if workers is not None else []
    cmd += extra or []
    wall, rss, _ = run_measured(cmd, env)
    PEAK_RSS_MB.append(rss)
    m = json.loads((out / "manifest.json").read_text())
    return {
        "wall": wall,
        "rss": rss,
        "papers": m["counts"]["papers"],
        "dead": m["counts"]["dead_letter"],
        "images": m["counts"]["images_embedded"],
        "reused": m["incremental"]["reused"],
        "runner": m["run"].get("runner"),
        "bytes": sum(f["bytes"] for fs in m["files"].values() for f in fs),
    }


def digests(out: Path) -> dict:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.glob("data/*/*.parquet"))
    }


def fmt_row(cols) -> str:
    return "| " + " | ".join(str(c) for c in cols) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image-sizes", type=int, nargs="*", default=[200, 2000])
    ap.add_argument("--text-sizes", type=int, nargs="*", default=[2000, 20000])
    ap.add_argument("--figures", type=int, default=169)
    ap.add_argument("--image-kb", type=int, default=19, help="noise budget of a generated figure (19: PNGs of ~30 KB)")
    ap.add_argument("--incremental", type=int, default=200, help="image-rich corpus size for the 1%% rebuild (0: skip)")
    ap.add_argument(
        "--one-worker-max",
        type=int,
        default=10**9,
        help="measure --workers 1 only for image-rich corpora up to this size (it is the slowest run)",
    )
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="'all cores' (default: %(default)s)")
    ap.add_argument("--workdir", default=None, help="where corpora and builds go (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the builds")
    ap.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    ap.add_argument(
        "--real-copies",
        type=int,
        default=100,
        help="copies of the real papers with real figures (100: ~700 papers, ~2,900 figures; 0: skip that row)",
    )
    ap.add_argument(
        "--start-text", type=int, default=1000, help="text pages for the start-up and rebuild rows (0: skip them)"
    )
    ap.add_argument(
        "--speed-only", action="store_true", help="only the speed table (real figures, start-up, rebuilds, workers)"
    )
    ap.add_argument(
        "--timeline",
        type=int,
        default=0,
        metavar="N",
        help="only: a per-second CPU timeline (launcher vs workers) of a build of N text pages, 1 and all workers",
    )
    ap.add_argument("--floor-only", nargs=2, metavar=("PAGES", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_only:
        print(json.dumps(floor(*args.floor_only)))
        return 0
    if args.quick:
        args.image_sizes, args.text_sizes, args.incremental, args.figures = [10, 40], [200], 20, 60
        args.real_copies, args.start_text = 2, 200
    if args.speed_only:
        args.image_sizes, args.text_sizes, args.incremental = [], [], 0
    # Timed as a set-up checkout runs: with the package's bytecode written (scripts/setup.sh
    # does this; where PYTHONDONTWRITEBYTECODE is set, nothing else would).
    import compileall

    compileall.compile_dir(str(ROOT / "sciga"), quiet=1)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="sciga-bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    n_all = args.workers
    if args.timeline:
        pages = text_corpus(workdir, args.timeline)
        for w in sorted({1, n_all}):
            out = workdir / f"out_timeline_w{w}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "sciga", "build", "--input", str(pages), "--output", str(out)]
            wall, rows = cpu_timeline([*cmd, "--workers", str(w), "--quiet"])
            print(f"--workers {w}: {wall:.1f} s wall")
            print(fmt_row(["s", "launcher CPU %", "workers CPU %", "worker processes"]))
            print(fmt_row(["---:", "---:", "---:", "---:"]))
            for t, a, b, n in rows:
                print(fmt_row([f"{t:.0f}", f"{a:.0f}", f"{b:.0f}", n]))
            print()
            shutil.rmtree(out, ignore_errors=True)
        return 0
    print(f"machine: {os.cpu_count()} cores; all cores = {n_all} workers; workdir {workdir}", file=sys.stderr)
    rows_img, rows_txt, notes = [], [], []
    speed: list[tuple] = []
    if args.real_copies:
        pages = real_figure_corpus(workdir, args.real_copies)
        print(f"real figures x{args.real_copies}: floor ...", file=sys.stderr)
        fl_out = workdir / "floor_real.parquet"
        fl_wall, _, fl_json = run_measured(
            [sys.executable, str(HERE / "scale.py"), "--floor-only", str(pages), str(fl_out)]
        )
        fl_out.unlink()
        n_papers = sum(1 for _ in pages.glob("*/*.html"))
        for w in sorted({1, n_all}):
            out = workdir / f"out_real_w{w}"
            shutil.rmtree(out, ignore_errors=True)
            print(f"real figures: build --workers {w} ...", file=sys.stderr)
            r = build(pages, out, w)
            speed.append(
                (
                    f"whole build, {n_papers} real papers with {json.loads(fl_json)['images']} real figures, "
                    f"--workers {w}",
                    f"{r['wall']:.1f} s",
                    "floor: lxml parse + read + full Pillow decode + zstd write, 1 core",
                    f"{fl_wall:.1f} s",
                    f"{r['wall'] / fl_wall:.2f}x",
                    "<= 0.8x" if w == n_all else "",
                )
            )
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    if args.start_text:
        speed += start_up_rows(workdir, args.start_text, n_all)

    for n in args.image_sizes:
        pages = image_corpus(workdir, n, args.figures, args.image_kb)
        print(f"image-rich {n}: floor ...", file=sys.stderr)
        fl_out = workdir / f"floor_{n}.parquet"
        fl_wall, fl_rss, fl_json = run_measured(
            [sys.executable, str(HERE / "scale.py"), "--floor-only", str(pages), str(fl_out)]
        )
        fl = json.loads(fl_json)
        print(f"  -> floor wall {fl_wall:.1f} s, peak RSS {fl_rss:.0f} MB", file=sys.stderr, flush=True)
        fl_out.unlink()
        res = {}
        for w in sorted({1, n_all}) if n <= args.one_worker_max else [n_all]:
            print(f"image-rich {n}: build --workers {w} ...", file=sys.stderr)
            out = workdir / f"out_image_{n}_w{w}"
            shutil.rmtree(out, ignore_errors=True)
            res[w] = build(pages, out, w)
            print(f"  -> {json.dumps(res[w])}", file=sys.stderr, flush=True)
            if w != n_all and not args.keep:
                shutil.rmtree(out, ignore_errors=True)
        if 1 in res and n_all in res and n_all != 1:
            same = (
                digests(workdir / f"out_image_{n}_w{n_all}") == digests(workdir / f"out_image_{n}_w1")
                if (workdir / f"out_image_{n}_w1").exists()
                else None
            )
        else:
            same = None
        rows_img.append((n, fl, fl_wall, fl_rss, res, same))
        if not args.keep:
            shutil.rmtree(workdir / f"out_image_{n}_w{n_all}", ignore_errors=True)

    for n in args.text_sizes:
        pages = text_corpus(workdir, n)
        print(f"text {n}: build --workers {n_all} ...", file=sys.stderr)
        out = workdir / f"out_text_{n}"
        shutil.rmtree(out, ignore_errors=True)
        rows_txt.append((n, build(pages, out, n_all)))
        print(f"  -> {json.dumps(rows_txt[-1][1])}", file=sys.stderr, flush=True)
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)

    inc = None
    if args.incremental:
        n = args.incremental
        pages = image_corpus(workdir, n, args.figures, args.image_kb)
        work = workdir / f"inc_pages_{n}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pages, work, copy_function=os.link)
        out, clean_out = workdir / "inc_out", workdir / "inc_clean"
        for d in (out, clean_out):
            shutil.rmtree(d, ignore_errors=True)
        print(f"incremental {n}: clean build ...", file=sys.stderr)
        clean = build(work, out, n_all)
        changed = max(1, n // 100)
        for page in sorted(work.glob("*/*.html"))[:changed]:
            text = page.read_text(encoding="utf-8")
            page.unlink()  # hard link: write a new file, leave the corpus alone
            page.write_text(
                text.replace(
                    "</article>", '<div class="ltx_para"><p class="ltx_p">An added paragraph.</p></div></article>', 1
                ),
                encoding="utf-8",
            )
        print(f"incremental {n}: rebuild with {changed} changed ...", file=sys.stderr)
        again = build(work, out, n_all)
        print(f"incremental {n}: clean build of the changed inputs ...", file=sys.stderr)
        build(work, clean_out, n_all)
        inc = (n, changed, clean, again, digests(out) == digests(clean_out))
        print(
            f"  -> clean {clean['wall']:.1f} s, rebuild {again['wall']:.1f} s, reused {again['reused']}, "
            f"identical {inc[-1]}",
            file=sys.stderr,
            flush=True,
        )
        if not args.keep:
            for d in (out, clean_out, work):
                shutil.rmtree(d, ignore_errors=True)

    # ---- report
    print()
    if speed:
        print(f"Speed (issue 26): each row against its baseline measured in the same run. {os.cpu_count()} cores.")
        print()
        print(fmt_row(["measure", "value", "baseline", "baseline value", "ratio", "goal"]))
        print(fmt_row(["---", "---:", "---", "---:", "---:", "---"]))
        for row in speed:
            print(fmt_row(row))
        print()
        print(f"Peak RSS of any build above (process tree): {max(PEAK_RSS_MB, default=0):.0f} MB (goal <= 2 GB).")
        print()
    mean_kb = 0.0
    if rows_img:
        figs = list((workdir / f"image_{args.figures}x{args.image_kb}kb_{rows_img[0][0]}" / ".figures").glob("*.png"))
        mean_kb = sum(f.stat().st_size for f in figs) / max(1, len(figs)) / 1024
    if rows_img:
        print(
            f"Image-rich papers ({args.figures} figures each, PNGs of {mean_kb:.0f} KB on average); one-core floor vs the "
            f"build, same papers, same run. {os.cpu_count()} cores."
        )
        print()
        print(fmt_row(["papers", "images", "run", "wall s", "ms/paper", "images/s", "peak RSS MB", "vs floor"]))
        print(fmt_row(["---:", "---:", "---", "---:", "---:", "---:", "---:", "---:"]))
    for n, fl, fl_wall, fl_rss, res, same in rows_img:
        print(
            fmt_row(
                [
                    n,
                    fl["images"],
                    "floor (1 core: parse + read + decode + write)",
                    f"{fl_wall:.1f}",
                    f"{1000 * fl_wall / n:.0f}",
                    f"{fl['images'] / fl_wall:.0f}",
                    f"{fl_rss:.0f}",
                    "1.00x",
                ]
            )
        )
        for w, r in sorted(res.items()):
            print(
                fmt_row(
                    [
                        n,
                        r["images"],
                        f"sciga build --workers {w}",
                        f"{r['wall']:.1f}",
                        f"{1000 * r['wall'] / n:.0f}",
                        f"{r['images'] / r['wall']:.0f}",
                        f"{r['rss']:.0f}",
                        f"{r['wall'] / fl_wall:.2f}x",
                    ]
                )
            )
        if 1 in res and n_all in res and n_all != 1:
            notes.append(
                f"{n} image-rich papers: {n_all} workers are {res[1]['wall'] / res[n_all]['wall']:.2f}x faster "
                f"than 1; shards identical: {same}"
            )
    if len(rows_img) >= 2:
        a, b = rows_img[0], rows_img[-1]
        for w in sorted(a[4]):
            if w in b[4]:
                notes.append(
                    f"peak RSS, {w} worker(s): {a[4][w]['rss']:.0f} MB at {a[0]} papers -> {b[4][w]['rss']:.0f} MB "
                    f"at {b[0]} papers ({b[4][w]['rss'] / a[4][w]['rss']:.2f}x for {b[0] / a[0]:.0f}x the papers)"
                )
    if rows_txt:
        print()
        print(f"Text papers (copies of the real pages in ../shared/corpus, distinct ids), {n_all} workers.")
        print()
        print(fmt_row(["papers", "wall s", "ms/paper", "papers/s", "peak RSS MB", "output MB"]))
        print(fmt_row(["---:", "---:", "---:", "---:", "---:", "---:"]))
        for n, r in rows_txt:
            print(
                fmt_row(
                    [
                        n,
                        f"{r['wall']:.1f}",
                        f"{1000 * r['wall'] / n:.1f}",
                        f"{n / r['wall']:.1f}",
                        f"{r['rss']:.0f}",
                        f"{r['bytes'] / 2**20:.1f}",
                    ]
                )
            )
    if inc:
        n, changed, clean, again, same = inc
        print()
        print(
            fmt_row(
                [
                    "incremental",
                    "papers",
                    "changed",
                    "clean build s",
                    "rebuild s",
                    "rebuild / clean",
                    "reused",
                    "shards identical to a clean build",
                ]
            )
        )
        print(fmt_row(["---", "---:", "---:", "---:", "---:", "---:", "---:", "---"]))
        print(
            fmt_row(
                [
                    "1% of the pages edited",
                    n,
                    changed,
                    f"{clean['wall']:.1f}",
                    f"{again['wall']:.1f}",
                    f"{again['wall'] / clean['wall']:.2f}",
                    again["reused"],
                    same,
                ]
            )
        )
    if notes:
        print()
        for line in notes:
            print("- " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
