"""Benchmark: how much of the model's own rate, and of the decode floor, the vision stage keeps.

    python bench/vision.py [--arch resnet101|null] [--images 64] [--large-images N] [--batch 64]
                           [--workers N] [--no-share-model] [--precision fp32|bf16]
                           [--device auto|cpu|cuda] [--sets sample,large] [--json FILE]

From one run, for each image set, on cuda when a GPU is present (cpu otherwise):

- **model only**: the build's model (``figure_model.LoadedFigureModel``, which stacks the
  batch, moves it to the device and normalises it there) on uint8 images already decoded
  in memory, fp32 (the baseline), and bf16 too with ``--precision bf16``;
- **decode floor**: ``--workers`` processes (a multiprocessing pool) doing only what the
  stage's decoding does (read the file, decode, resize to the model's input) on the same
  images: the most any pipeline on those cores could deliver;
- **end to end**: a Beam DirectRunner pipeline with ``--workers`` SDK processes
  (``multi_processing``), ``(key, file path)`` pairs -> ``ClassifyImages`` (reshuffle, read +
  decode + resize in the workers, RunInference with the build's handler; one model per
  machine in its own process, ``--vision-share-model``, unless ``--no-share-model``) ->
  timestamps. "wall" is the rate with start-up (worker processes, model load) included;
  "steady" is the rate from the first image read to the last result, which is what a long
  run sees;
- **ratios**: end to end (steady) / model only (fp32; measured before and after the
  end-to-end run, the mean is used), end to end (steady) / decode floor (likewise), and the
  single-core read + decode + resize cost per image (what sizes the CPU side of a GPU
  worker).

``--arch null`` is a model that costs nothing (``transforms/vision/null_model.py``: fixed
probabilities whatever the pixels, handed the batch as it reaches the device): with it the
end-to-end run measures the feed alone, on any machine, no GPU needed. The run ends with one
line, for the first set of ``--sets``::

    vision feed: end to end X img/s vs decode floor Y img/s on N cores = R

On a GPU machine use enough images for a steady state, e.g. ``--images 8192 --batch 64``
(``--precision bf16 --batch 256`` for bf16); the large set is CPU-bound, so
``--large-images`` (default: ``--images``) can be smaller for the same steady state.
``--json FILE`` also writes every measured number, with the machine (GPU name, cores,
torch), as JSON.

Image sets: ``sample`` = the real figure files of the embedded samples and the dd3d corpus
tree (about 30 KiB each); ``thumbs`` = the same figures shrunk to 64 px (still 224 px model
inputs): cheap to decode, so a few processes hand the model as many images per second as a
16-core machine with real figures, which tests the hand-over rather than decoding;
``large`` = realistic arXiv-size figures (0.2-2 MB PNG and JPEG,
2000-3300 px) made from the same real figures and the corpus PDF figures: 2x2 multi-panel
mosaics and single figures at print resolution. The model is ``--arch`` with random
weights (speed does not depend on the weights).
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from paths import ROOT, corpus_dir

import sciga  # noqa: F401 - puts the checkout on sciga's path

from tests.vision_fixtures import encode_image

LARGE_RANGE = (200_000, 2_000_000)  # bytes


# ------------------------------------------------------------------ image sets


def real_figure_files() -> list[Path]:
    files = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))
    corpus = corpus_dir()
    if corpus is not None:
        files += sorted((corpus / "tex" / "dd3d" / "figures").glob("**/*.png"))
    return files


def _pdf_pages(dpi: int = 300) -> list:
    """The corpus PDF figures rasterised at print resolution (poppler), when available."""
    import shutil
    import subprocess

    from PIL import Image

    corpus = corpus_dir()
    if corpus is None or not shutil.which("pdftoppm"):
        return []
    blobs = [p.read_bytes() for p in sorted((corpus / "tex" / "2603.21852").glob("*.pdf"))]
    tarball = corpus / "tex" / "1709.07020" / "1709.07020v1.tar.gz"
    if tarball.is_file():
        with tarfile.open(tarball) as tf:
            blobs += [
                tf.extractfile(m).read() for m in tf.getmembers() if m.isfile() and m.name.lower().endswith(".pdf")
            ]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, data in enumerate(blobs):
            src = Path(tmp) / f"{i}.pdf"
            src.write_bytes(data)
            r = subprocess.run(
                ["pdftoppm", "-png", "-r", str(dpi), "-singlefile", str(src), str(Path(tmp) / f"{i}")],
                capture_output=True,
                timeout=120,
            )
            if r.returncode == 0 and (Path(tmp) / f"{i}.png").exists():
                out.append(Image.open(Path(tmp) / f"{i}.png").convert("RGB"))
    return out


def _fit(im, long_side: int):
    from PIL import Image

    s = long_side / max(im.size)
    return im.resize((max(1, round(im.width * s)), max(1, round(im.height * s))), Image.LANCZOS)


def make_thumbnails(dest: Path, sources: list[Path], long_side: int = 64) -> list[Path]:
    """The real figures shrunk to ``long_side`` px PNGs: decoding them costs a tenth of the
    sample's, so two processes feed the model as many images per second as a 16-core
    machine does with real figures; what limits then is the hand-over to the model."""
    from PIL import Image

    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i, p in enumerate(sources):
        path = dest / f"thumb_{i:03d}.png"
        _fit(Image.open(p).convert("RGB"), long_side).save(path)
        out.append(path)
    return out


def make_large_figures(dest: Path, sources: list[Path]) -> list[Path]:
    """Realistic-size figure files from real figures: 2x2 multi-panel mosaics (panels at
    1200 px, on white) and single figures at 2400 px, as PNG and JPEG in turn, plus the
    corpus PDF figures at 300 dpi; only files of 0.2-2 MB are kept."""
    from PIL import Image

    dest.mkdir(parents=True, exist_ok=True)
    figs = [Image.open(p).convert("RGB") for p in sources]
    candidates = []
    for i in range(0, len(figs) - 3, 2):
        panels = [_fit(f, 1200) for f in figs[i : i + 4]]
        cw, ch = max(p.width for p in panels), max(p.height for p in panels)
        canvas = Image.new("RGB", (2 * cw + 60, 2 * ch + 60), "white")
        for k, p in enumerate(panels):
            canvas.paste(p, (20 + (k % 2) * (cw + 20), 20 + (k // 2) * (ch + 20)))
        candidates.append(canvas)
    candidates += [_fit(f, 2400) for f in figs]
    candidates += _pdf_pages()
    out = []
    for i, im in enumerate(candidates):
        for fmt in ("PNG", "JPEG") if i % 2 == 0 else ("JPEG", "PNG"):
            data = encode_image(im, fmt)
            if LARGE_RANGE[0] <= len(data) <= LARGE_RANGE[1]:
                path = dest / f"large_{i:03d}.{'png' if fmt == 'PNG' else 'jpg'}"
                path.write_bytes(data)
                out.append(path)
                break
    return out


# ------------------------------------------------------------------ measurements


def decode_ms(paths: list[Path], size: int) -> float:
    """Read + decode + resize, CPU ms per image (one thread; CPU time, so other jobs on a
    shared machine do not inflate it), best of 3 passes."""
    from sciga.transforms.vision.inference import image_to_model_input

    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for p in paths:
            image_to_model_input(p.read_bytes(), size)
        best = min(best, time.process_time() - t)
    return 1000 * best / len(paths)


def model_only(weights: str, device: str, precision: str, arrays: list, batch: int) -> tuple[float, float]:
    """(images/s, CPU ms per image of this process, all its threads) of the handler on
    uint8 images already in memory, after one warm-up batch."""
    from sciga.transforms.vision.handlers import FigureModelHandler

    h = FigureModelHandler(weights, "classify", device, max_batch_size=batch, precision=precision)
    model = h.load_model()
    list(h.run_inference(arrays[:batch], model))  # warm-up: kernels picked, memory allocated
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, len(arrays), batch):
        list(h.run_inference(arrays[i : i + batch], model))
    return len(arrays) / (time.perf_counter() - t), 1000 * (time.process_time() - c) / len(arrays)


class TreeCpu:
    """CPU seconds (user + system) of this process and every process under it, by role,
    sampled every 0.5 s in a thread (a sample costs ~5 ms of CPU here): where the CPU of the end-to-end run goes (the runner,
    the SDK processes, the model server), measured as CPU time, which other jobs on a
    shared machine do not inflate. ``at(t)`` interpolates between samples."""

    def __init__(self, period: float = 0.5):
        import threading

        self.period, self.samples = period, []
        self._roles: dict = {}
        self._cpu: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @staticmethod
    def role(proc) -> str:
        try:
            cmd = " ".join(proc.cmdline())
        except Exception:  # noqa: BLE001 - gone, or a zombie
            return "other"
        if proc.pid == os.getpid():
            return "runner (this process)"
        if "sdk_worker_main" in cmd:
            return "SDK processes"
        if "spawn_main" in cmd:
            return "model server"
        if "ForkPoolWorker" in proc.name() or "multiprocessing" in cmd:
            return "pool"
        return "other"

    def sample(self) -> tuple[float, dict]:
        """(time, CPU seconds by role); a process that has ended keeps its last value."""
        import psutil

        me = psutil.Process()
        for proc in [me, *me.children(recursive=True)]:
            try:
                c = proc.cpu_times()
                role = self._roles.get(proc.pid) or self.role(proc)
            except psutil.Error:
                continue
            self._roles[proc.pid] = role
            self._cpu[proc.pid] = c.user + c.system
        by_role: dict = {}
        for pid, v in self._cpu.items():
            by_role[self._roles[pid]] = by_role.get(self._roles[pid], 0.0) + v
        return time.time(), by_role

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(self.sample())
            self._stop.wait(self.period)
        self.samples.append(self.sample())

    def at(self, t: float) -> dict:
        """CPU seconds by role at wall-clock time t (linear between the samples around it)."""
        before = max((s for s in self.samples if s[0] <= t), key=lambda s: s[0], default=self.samples[0])
        after = min((s for s in self.samples if s[0] >= t), key=lambda s: s[0], default=self.samples[-1])
        if after[0] == before[0]:
            return dict(before[1])
        w = (t - before[0]) / (after[0] - before[0])
        roles = set(before[1]) | set(after[1])
        return {r: before[1].get(r, 0.0) + w * (after[1].get(r, 0.0) - before[1].get(r, 0.0)) for r in roles}

    def between(self, t0: float, t1: float) -> dict:
        a, b = self.at(t0), self.at(t1)
        return {r: b.get(r, 0.0) - a.get(r, 0.0) for r in set(a) | set(b)}


def _decode_one(path: str) -> None:
    from sciga.transforms.vision.inference import image_to_model_input, read_image_file

    image_to_model_input(read_image_file(path), _DECODE_SIZE)


_DECODE_SIZE = 224


def decode_floor(paths: list[Path], n: int, size: int, workers: int) -> tuple[float, float]:
    """(images/s, CPU ms per image of all processes) of ``workers`` processes doing only
    the stage's read + decode + resize on the same n images (a forked pool, warmed up
    first): what those cores could feed."""
    import multiprocessing

    global _DECODE_SIZE
    _DECODE_SIZE = size
    items = [str(paths[i % len(paths)]) for i in range(n)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_decode_one, items[: 4 * workers], chunksize=1)  # every process started and warm
        with TreeCpu() as cpu:
            t0 = time.time()
            pool.map(_decode_one, items, chunksize=8)
            t1 = time.time()
        return n / (t1 - t0), 1000 * sum(cpu.between(t0, t1).values()) / n


_T0 = time.perf_counter()


def progress(msg: str) -> None:
    """One line per phase on stderr, with the seconds since start: a run cut off by a time
    limit still says where its time went."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def _stamp(kv):
    return os.getpid(), time.time()


class StampedReader:
    """``read_image_file`` that notes, per SDK process, when it first read an image: the
    moment decoding started there (start-up and model load are over by then: Beam sets
    up every DoFn of the fused stage, RunInference's model included, before the first
    element)."""

    def __init__(self, folder: str):
        self.folder, self.started = folder, False

    def __call__(self, path: str) -> bytes:
        from sciga.transforms.vision.inference import read_image_file

        if not self.started:
            self.started = True
            Path(self.folder, f"first_read_{os.getpid()}_{id(self)}").write_text(repr(time.time()))
        return read_image_file(path)


def end_to_end(weights: str, paths: list[Path], n: int, options, workers: int) -> dict:
    """n images through ClassifyImages on a multi-process DirectRunner: wall seconds
    (start-up included), the number classified / failed, and when the first and the last
    result came out (wall clock, the same in every process of the machine)."""
    import json

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from sciga.transforms.vision.inference import ClassifyImages

    items = [(f"{i:06d}", str(paths[i % len(paths)])) for i in range(n)]
    out = Path(tempfile.mkdtemp(prefix="sciga-bench-"))
    opts = PipelineOptions(["--direct_num_workers", str(workers), "--direct_running_mode", "multi_processing"])
    t = time.time()
    with TreeCpu() as cpu, beam.Pipeline("DirectRunner", options=opts) as p:
        res = p | beam.Create(items) | ClassifyImages(weights, options, load_bytes=StampedReader(str(out)))
        for name, pc in (("ok", res.probabilities), ("failed", res.failed)):
            (
                pc
                | f"Stamp{name}" >> beam.Map(_stamp)
                | f"Summary{name}" >> beam.CombinePerKey(_summary_fn())
                | f"All{name}" >> beam.combiners.ToList()
                | f"Write{name}" >> beam.Map(lambda v, f=str(out / name): Path(f).write_text(json.dumps(v)))
            )
    wall = time.time() - t
    per = {k: json.loads((out / k).read_text()) for k in ("ok", "failed")}
    ok = sum(c for _, (c, _, _) in per["ok"])
    failed = sum(c for _, (c, _, _) in per["failed"])
    first = min(f for _, (_, f, _) in per["ok"])
    last = max(la for _, (_, _, la) in per["ok"])
    read_at = {int(f.name.split("_")[2]): float(f.read_text()) for f in out.glob("first_read_*")}
    reads = {pid: r - t for pid, r in read_at.items()}
    processes = {
        pid: {"first_read": reads.get(pid), "results": c, "first": f - t, "last": la - t}
        for pid, (c, f, la) in per["ok"]
    }
    steady_cpu = cpu.between(min(read_at.values()), last)  # first image read -> last result
    return {
        "wall": wall,
        "ok": ok,
        "failed": failed,
        "cpu_ms_by_role": {r: 1000 * v / ok for r, v in sorted(steady_cpu.items()) if v > 0},
        "started": min(reads.values()),
        "first": first - t,
        "last": last - t,
        "processes": processes,
    }


def _summary_fn():
    import apache_beam as beam

    class Summary(beam.CombineFn):
        """(count, first, last) of result timestamps."""

        def create_accumulator(self):
            return 0, float("inf"), float("-inf")

        def add_input(self, acc, t):
            return acc[0] + 1, min(acc[1], t), max(acc[2], t)

        def merge_accumulators(self, accs):
            accs = list(accs)
            return sum(a[0] for a in accs), min(a[1] for a in accs), max(a[2] for a in accs)

        def extract_output(self, acc):
            return acc if acc[0] else (0, 0.0, 0.0)

    return Summary()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--arch", default="resnet101", help="a torchvision architecture, or null (a model that costs nothing)"
    )
    ap.add_argument("--images", type=int, default=64, help="images per set (cycled over its files)")
    ap.add_argument("--large-images", type=int, default=None, help="images of the large set (default: --images)")
    ap.add_argument("--batch", type=int, default=64, help="RunInference batch (min = max: full batches)")
    ap.add_argument("--input-size", type=int, default=224)
    ap.add_argument(
        "--workers", type=int, default=min(16, os.cpu_count() or 1), help="SDK processes (default: cores, at most 16)"
    )
    ap.add_argument(
        "--no-share-model",
        dest="share_model",
        action="store_false",
        help="one model per SDK process instead of one per machine in its own process",
    )
    ap.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="end-to-end precision (model-only fp32 is always measured)",
    )
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--sets", default="sample,large")
    ap.add_argument("--json", metavar="FILE", default=None, help="also write the measurements here as JSON")
    args = ap.parse_args()

    import numpy as np
    import torch

    from sciga.transforms.vision.inference import InferenceOptions, image_to_model_input
    from sciga.transforms.vision.medical import DOCFIGURE_LABELS
    from sciga.transforms.vision.models import CheckpointMeta, build_model, save_checkpoint

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]
    )  # the SDK processes import this checkout
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    size = args.input_size
    sources = real_figure_files()
    names = args.sets.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "bench.pt")
        torch.manual_seed(0)
        save_checkpoint(
            weights,
            build_model(args.arch, 28, 0.1),
            CheckpointMeta(arch=args.arch, labels=list(DOCFIGURE_LABELS), input_size=size),
        )
        sets = {"sample": sources}
        if "thumbs" in names:
            sets["thumbs"] = make_thumbnails(Path(tmp) / "thumbs", sources)
        if "large" in names:
            sets["large"] = make_large_figures(Path(tmp) / "large", sources)
            progress(f"large set: {len(sets['large'])} files made")
        for name in names:
            paths = sets[name]
            n = args.large_images if name == "large" and args.large_images else args.images
            sizes = [p.stat().st_size for p in paths]
            distinct = [image_to_model_input(p.read_bytes(), size) for p in paths]
            arrays = [distinct[i % len(distinct)] for i in range(n)]
            r = {
                "set": name,
                "images": n,
                "files": len(paths),
                "mean_kb": np.mean(sizes) / 1024,
                "min_kb": min(sizes) / 1024,
                "max_kb": max(sizes) / 1024,
                "decode_ms": decode_ms(paths, size),
            }
            progress(f"[{name}] read+decode+resize {r['decode_ms']:.1f} CPU ms/img; model only fp32 ...")
            r["model_fp32_before"], r["model_cpu_ms"] = model_only(weights, device, "fp32", arrays, args.batch)
            progress(f"[{name}] model only fp32 {r['model_fp32_before']:.1f} img/s")
            if args.precision == "bf16":
                r["model_bf16"] = model_only(weights, device, "bf16", arrays, args.batch)[0]
                progress(f"[{name}] model only bf16 {r['model_bf16']:.1f} img/s")
            r["floor_before"], r["floor_cpu_ms_before"] = decode_floor(paths, n, size, args.workers)
            progress(f"[{name}] decode floor, {args.workers} processes: {r['floor_before']:.1f} img/s")
            options = InferenceOptions(
                device=device,
                max_batch_size=args.batch,
                min_batch_size=args.batch,
                share_model=args.share_model,
                precision=args.precision,
            )
            progress(f"[{name}] end to end, {n} images, {args.workers} SDK processes ...")
            e = end_to_end(weights, paths, n, options, args.workers)
            assert (e["ok"], e["failed"]) == (n, 0), e
            r["e2e_wall"] = e["ok"] / e["wall"]
            r["e2e_steady"] = e["ok"] / (e["last"] - e["started"])  # first image read -> last result
            r["e2e"] = e
            progress(f"[{name}] end to end steady {r['e2e_steady']:.1f} img/s")
            # this machine may be shared: the baselines again after the end-to-end run, both kept
            r["floor_after"], r["floor_cpu_ms_after"] = decode_floor(paths, n, size, args.workers)
            r["floor"] = (r["floor_before"] + r["floor_after"]) / 2
            r["floor_cpu_ms"] = min(r["floor_cpu_ms_before"], r["floor_cpu_ms_after"])
            r["e2e_cpu_ms"] = sum(e["cpu_ms_by_role"].values())
            r["model_fp32_after"] = model_only(weights, device, "fp32", arrays, args.batch)[0]
            r["model_fp32"] = (r["model_fp32_before"] + r["model_fp32_after"]) / 2
            rows.append(r)
            print(f"[{name}] done: {r}", file=sys.stderr, flush=True)

    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    sharing = "one shared model in its own process" if args.share_model else "one model per SDK process"
    print(
        f"### vision benchmark: {args.arch} @ {size}px, device {device} ({gpu}), end to end {args.precision}, "
        f"batch {args.batch}, {args.workers} SDK processes, {sharing}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, {torch.get_num_threads()} torch threads in this process\n"
    )
    bf = args.precision == "bf16"
    print(
        "| set | files | file size KB mean (min-max) | model only fp32 img/s (before, after) |"
        + (" model only bf16 img/s |" if bf else "")
        + " decode floor img/s (before, after) | end to end wall img/s | end to end steady img/s |"
        " steady / model fp32 | steady / decode floor |"
    )
    print("|---|---:|---:|---:|" + ("---:|" if bf else "") + "---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['set']} | {r['files']} | {r['mean_kb']:.0f} ({r['min_kb']:.0f}-{r['max_kb']:.0f}) | "
            f"{r['model_fp32']:.2f} ({r['model_fp32_before']:.2f}, {r['model_fp32_after']:.2f}) |"
            + (f" {r['model_bf16']:.2f} |" if bf else "")
            + f" {r['floor']:.1f} ({r['floor_before']:.1f}, {r['floor_after']:.1f}) |"
            + f" {r['e2e_wall']:.2f} | {r['e2e_steady']:.2f} | **{100 * r['e2e_steady'] / r['model_fp32']:.0f} %** |"
            + f" **{100 * r['e2e_steady'] / r['floor']:.0f} %** |"
        )
    print(
        "\nCPU time per image (CPU time is not inflated by other jobs on a shared machine; the model's is"
        f" that of the model-only run{', host side only: the work is on the GPU' if device == 'cuda' else ''}):\n"
    )
    print("| set | read+decode+resize CPU ms/img (1 thread) | model fp32 CPU ms/img | decode share of the CPU work |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['set']} | {r['decode_ms']:.1f} | {r['model_cpu_ms']:.2f} | "
            f"{100 * r['decode_ms'] / (r['decode_ms'] + r['model_cpu_ms']):.1f} % |"
        )
    print(
        "\nWhere the CPU goes, ms per image (CPU time of every process, user + system; end to end: from the"
        " first image read to the last result; the floor: its pool, the better of its two runs). On cores of"
        " its own, end to end would reach the decode floor times the CPU ratio:\n"
    )
    roles = sorted({k for r in rows for k in r["e2e"]["cpu_ms_by_role"]})
    print(
        "| set | decode floor CPU ms/img | end to end CPU ms/img | " + " | ".join(roles) + " | CPU ratio floor / e2e |"
    )
    print("|---|---:|---:|" + "---:|" * len(roles) + "---:|")
    for r in rows:
        by = r["e2e"]["cpu_ms_by_role"]
        print(
            f"| {r['set']} | {r['floor_cpu_ms']:.2f} | {r['e2e_cpu_ms']:.2f} | "
            + " | ".join(f"{by.get(k, 0.0):.2f}" for k in roles)
            + f" | **{r['floor_cpu_ms'] / r['e2e_cpu_ms']:.2f}** |"
        )
    print(
        "\nGoals: on a 16-core single-GPU machine, end to end (steady) at >= 50 % of the model-only fp32 rate;"
        " with --arch null on CPU, 2 workers, end to end (steady) at >= 80 % of the decode floor."
    )
    for r in rows:
        e = r["e2e"]
        print(
            f"\n{r['set']}: {r['images']} images end to end in {e['wall']:.1f} s wall: first image read after "
            f"{e['started']:.1f} s (worker start-up, model load), first result after {e['first']:.1f} s, last after "
            f"{e['last']:.1f} s; steady = images / (last result - first read); "
            f"{r['e2e_steady'] / args.workers:.1f} images/s per SDK process."
        )
        for pid, q in sorted(e["processes"].items(), key=lambda kv: kv[1]["first"]):
            read = "?" if q["first_read"] is None else f"{q['first_read']:.1f}"
            print(
                f"  SDK process {pid}: first read {read} s, {q['results']} results from {q['first']:.1f} s "
                f"to {q['last']:.1f} s"
            )
    if args.json:
        import json

        machine = {
            "device": device,
            "gpu": gpu,
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "arch": args.arch,
            "input_size": size,
            "batch": args.batch,
            "workers": args.workers,
            "share_model": args.share_model,
            "precision": args.precision,
        }
        for r in rows:
            r["e2e_steady_per_process"] = r["e2e_steady"] / args.workers
        Path(args.json).write_text(json.dumps({"machine": machine, "sets": rows}, indent=2) + "\n")
    first = rows[0]
    print(
        f"\nvision feed: end to end {first['e2e_steady']:.1f} img/s vs decode floor {first['floor']:.1f} img/s "
        f"on {args.workers} cores = {first['e2e_steady'] / first['floor']:.2f}"
    )


if __name__ == "__main__":
    main()
