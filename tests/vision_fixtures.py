"""Shared helpers for the vision tests: real figure images grouped by paper, a synthetic
graphical-abstract set built from them, tiny torchvision models saved to disk, and crafted
image files (bombs, CMYK JPEG, animated GIF ...)."""

from __future__ import annotations

import io
import random
import shutil
import struct
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Optional

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


def corpus_dir() -> Optional[Path]:
    from conftest import CORPUS  # the one corpus lookup of the tests

    return CORPUS if CORPUS.is_dir() else None


def rasterize_pdf(data: bytes, dpi: int = 60) -> Optional[Image.Image]:
    """First page of a PDF as RGB (poppler's pdftoppm), None when poppler is missing."""
    if not shutil.which("pdftoppm"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.pdf"
        src.write_bytes(data)
        out = subprocess.run(
            ["pdftoppm", "-png", "-r", str(dpi), "-singlefile", str(src), str(Path(tmp) / "out")],
            capture_output=True,
            timeout=60,
        )
        png = Path(tmp) / "out.png"
        if out.returncode != 0 or not png.exists():
            return None
        return Image.open(png).convert("RGB")


def real_figures() -> dict[str, list[tuple[str, Image.Image]]]:
    """paper -> [(name, RGB image)]: the embedded samples' figures, and the corpus TeX trees'
    PNG/PDF figures (one copy of each distinct file)."""
    papers: dict[str, list[tuple[str, Image.Image]]] = {}
    for d in sorted((ROOT / "samples" / "html").iterdir()):
        imgs = sorted(d.glob("**/*.png"))
        if imgs:
            papers[d.name] = [(p.name, Image.open(p).convert("RGB")) for p in imgs]
    corpus = corpus_dir()
    if corpus:
        dd3d = corpus / "tex" / "dd3d" / "figures"
        if dd3d.is_dir():
            papers["dd3d"] = [(p.name, Image.open(p).convert("RGB")) for p in sorted(dd3d.glob("**/*.png"))]
        eml = corpus / "tex" / "2603.21852"
        pdfs = [(p.name, rasterize_pdf(p.read_bytes())) for p in sorted(eml.glob("*.pdf"))] if eml.is_dir() else []
        pdfs = [(n, im) for n, im in pdfs if im is not None]
        tarball = corpus / "tex" / "1709.07020" / "1709.07020v1.tar.gz"
        if tarball.is_file():
            with tarfile.open(tarball) as tf:
                for member in tf.getmembers():
                    if member.isfile() and member.name.lower().endswith(".pdf"):
                        im = rasterize_pdf(tf.extractfile(member).read())
                        if im is not None:
                            pdfs.append((member.name.rsplit("/", 1)[-1], im))
        if pdfs:
            papers["pdf_figures"] = pdfs  # 2603.21852 and 1709.07020: few figures each
    return papers


def mosaic(images: list[Image.Image], cell: tuple[int, int] = (300, 220), gap: int = 8) -> Image.Image:
    """2x2 grid of the images, each fitted into its cell on white."""
    cw, ch = cell
    out = Image.new("RGB", (2 * cw + 3 * gap, 2 * ch + 3 * gap), "white")
    for i, im in enumerate(images[:4]):
        s = min(cw / im.width, ch / im.height)
        small = im.resize((max(1, round(im.width * s)), max(1, round(im.height * s))), Image.LANCZOS)
        x = gap + (i % 2) * (cw + gap) + (cw - small.width) // 2
        y = gap + (i // 2) * (ch + gap) + (ch - small.height) // 2
        out.paste(small, (x, y))
    return out


def synthetic_ga_set(papers, seed: int = 5):
    """[(paper, ga image, expected type, expected components)] built from real figures:
    exact copies and resized copies (Reused), crops and 2x2 mosaics (Modified), figures of
    another paper (Original)."""
    rng = random.Random(seed)
    names = sorted(papers)
    cases = []
    for pi, paper in enumerate(names):
        figs = papers[paper]
        for name, im in figs:
            cases.append((paper, im.copy(), "Reused", [name]))
            s = rng.choice([0.5, 0.7, 1.3, 1.6])
            cases.append(
                (
                    paper,
                    im.resize((max(8, round(im.width * s)), max(8, round(im.height * s))), Image.LANCZOS),
                    "Reused",
                    [name],
                )
            )
            fw, fh = rng.uniform(0.5, 0.75), rng.uniform(0.5, 0.75)
            w, h = round(im.width * fw), round(im.height * fh)
            x, y = rng.randint(0, im.width - w), rng.randint(0, im.height - h)
            crop = im.crop((x, y, x + w, y + h))
            if rng.random() < 0.5:
                crop = crop.resize((round(w * 1.25), round(h * 1.25)), Image.LANCZOS)
            cases.append((paper, crop, "Modified", [name]))
        if len(figs) >= 4:
            for _k in range(2):
                pick = rng.sample(range(len(figs)), 4)
                cases.append((paper, mosaic([figs[i][1] for i in pick]), "Modified", sorted(figs[i][0] for i in pick)))
        other = names[(pi + 1) % len(names)]
        for _name, im in papers[other]:
            cases.append((paper, im.copy(), "Original", []))
    return cases


# ------------------------------------------------------------------ crafted image files


def png_bytes(image: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    image.save(buf, "PNG", **kw)
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bomb_png(width: int = 10_000, height: int = 10_000) -> bytes:
    """A PNG whose header claims width x height RGB pixels, with one tiny compressed row:
    a few dozen bytes on disk, 300 MB if anyone decoded it."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" + b"\x00" * 3 * min(width, 64))
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def cmyk_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("CMYK", (40, 30), (0, 255, 255, 0)).save(buf, "JPEG", quality=95)  # red in CMYK
    return buf.getvalue()


def animated_gif() -> bytes:
    frames = [Image.new("RGB", (24, 16), c) for c in ((0, 0, 255), (0, 255, 0), (255, 0, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    return buf.getvalue()


SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'


# ------------------------------------------------------------------ tiny models


def save_tiny_classifier(
    path, labels=None, arch: str = "resnet18", input_size: int = 32, bias: Optional[dict] = None, seed: int = 0
):
    """A randomly initialised torchvision model saved as a sciga checkpoint. ``bias`` maps
    label -> a value added to that logit's bias (to force or forbid a class)."""
    import torch

    from sciga.transforms.vision.medical import DOCFIGURE_LABELS
    from sciga.transforms.vision.models import CheckpointMeta, build_model, save_checkpoint

    labels = list(labels or DOCFIGURE_LABELS)
    torch.manual_seed(seed)
    model = build_model(arch, len(labels), 0.1)
    if bias:
        head = model.fc[-1]
        with torch.no_grad():
            for lab, b in bias.items():
                head.bias[labels.index(lab)] += b
    save_checkpoint(str(path), model, CheckpointMeta(arch=arch, labels=labels, input_size=input_size))
    return str(path)


# ------------------------------------------------------------------ builds


def copy_sample(dest: Path, stem: str = "2511.99001", edit: Optional[tuple[str, str]] = None) -> Path:
    """A copy of one embedded sample page (with its images) under dest, optionally with
    one text replacement in the HTML."""
    src = ROOT / "samples" / "html" / stem
    out = dest / stem
    shutil.copytree(src, out)
    if edit:
        page = out / f"{stem}.html"
        html = page.read_text(encoding="utf-8")
        assert edit[0] in html, edit[0]
        page.write_text(html.replace(edit[0], edit[1], 1), encoding="utf-8")
    return out


def run_build(argv: list[str]) -> int:
    from sciga.pipelines.cli import main

    return main(["build", *argv])


def read_rows(out: Path, config: str) -> list[dict]:
    import pyarrow.parquet as pq

    files = sorted((out / "data" / config).glob("*.parquet"))
    rows = []
    for f in files:
        rows.extend(pq.read_table(f).to_pylist())
    return rows


# ------------------------------------------------------------------ a local HTTP server


class LocalServer:
    """A real HTTP server on 127.0.0.1 serving ``routes``: path -> list of (status, body)
    answered in turn (the last one repeats), to inject faults such as a 500 before a 200."""

    def __init__(self, routes: dict):
        import http.server
        import threading

        self.routes = {k: list(v) for k, v in routes.items()}
        self.hits: dict[str, int] = {}
        self.agents: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                server.agents.append(self.headers.get("User-Agent", ""))
                answers = server.routes.get(self.path, [(404, b"not found")])
                status, body = answers[0] if len(answers) == 1 else answers.pop(0)
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def figure_variants(input_size: int) -> list:
    """uint8 model inputs from the real figures (samples, and the dd3d corpus figures when
    present): each figure whole, mirrored, its four quadrants and its centre (~200 images)."""
    from sciga.transforms.vision.models import resize_for_model

    files = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))
    corpus = corpus_dir()
    if corpus:
        files += sorted((corpus / "tex" / "dd3d" / "figures").glob("**/*.png"))
    out = []
    for p in files:
        im = Image.open(p).convert("RGB")
        w, h = im.size
        for v in (
            im,
            im.transpose(Image.FLIP_LEFT_RIGHT),
            im.crop((0, 0, w // 2, h // 2)),
            im.crop((w // 2, 0, w, h // 2)),
            im.crop((0, h // 2, w // 2, h)),
            im.crop((w // 2, h // 2, w, h)),
            im.crop((w // 4, h // 4, 3 * w // 4, 3 * h // 4)),
        ):
            out.append(resize_for_model(v, input_size))
    return out


def save_trained_head_classifier(
    path, images, arch: str = "resnet18", input_size: int = 64, classes: int = 8, seed: int = 0
):
    """A classifier that behaves like a trained one (confident, varied top-1), built in a
    second: a random ``arch`` backbone, its figures' pooled features grouped into
    ``classes`` clusters (k-means), and the head fitted to those clusters (logistic
    regression), so predictions have the margins of a trained model. A random head on a
    random backbone predicts one class for nearly everything, with near-ties: no test of
    precision could mean anything on it. Labels beyond ``classes`` get a -30 bias."""
    import numpy as np
    import torch

    from sciga.transforms.vision.medical import DOCFIGURE_LABELS
    from sciga.transforms.vision.models import (
        IMAGENET_MEAN,
        IMAGENET_STD,
        CheckpointMeta,
        build_model,
        normalise,
        save_checkpoint,
    )

    torch.manual_seed(seed)
    net = build_model(arch, len(DOCFIGURE_LABELS), 0.1).eval()
    head, net.fc = net.fc, torch.nn.Identity()
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    with torch.no_grad():
        feats = net(normalise(torch.from_numpy(np.stack(images)), mean, std))
    mu, sd = feats.mean(0), feats.std(0) + 1e-6
    z = (feats - mu) / sd
    centres = z[[0]]
    for _ in range(classes - 1):  # farthest-point start: deterministic
        centres = torch.cat([centres, z[[int(torch.cdist(z, centres).min(1).values.argmax())]]])
    for _ in range(50):
        lab = torch.cdist(z, centres).argmin(1)
        centres = torch.stack([z[lab == k].mean(0) if (lab == k).any() else centres[k] for k in range(classes)])
    lin = torch.nn.Linear(z.shape[1], classes)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=200)

    def loss_fn():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(lin(z), lab) + 1e-3 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(loss_fn)
    with torch.no_grad():
        w = torch.zeros_like(head[-1].weight)
        b = torch.full_like(head[-1].bias, -30.0)
        w[:classes] = lin.weight / sd
        b[:classes] = lin.bias - (lin.weight / sd) @ mu
        head[-1].weight.copy_(w)
        head[-1].bias.copy_(b)
    net.fc = head
    save_checkpoint(str(path), net, CheckpointMeta(arch=arch, labels=list(DOCFIGURE_LABELS), input_size=input_size))
    return str(path)


# ------------------------------------------------------------------ watching the shared model


class _RecordingModel:
    """Wraps the loaded model; appends what each call receives to a JSON-lines file."""

    def __init__(self, model, record: str):
        self.model, self.record = model, record

    def __call__(self, batch):
        import json
        import os
        import time

        t = time.time()
        out = self.model(batch)
        line = {
            "what": "model_call",
            "pid": os.getpid(),
            "type": f"{type(batch).__module__}.{type(batch).__name__}",
            "dtype": str(getattr(batch, "dtype", None)),
            "shape": list(getattr(batch, "shape", ())),
            "device": str(self.model.device),
            "start": t,
            "seconds": time.time() - t,
        }
        with open(self.record, "a") as f:
            f.write(json.dumps(line) + "\n")
        return out


def _recording_handler_class():
    from sciga.transforms.vision.handlers import FigureModelHandler

    class RecordingHandler(FigureModelHandler):
        """FigureModelHandler that records, in ``record`` (JSON lines), each model load
        (process id: with sharing, the model server's), each batch the model process
        receives (type, dtype, shape, device) and each caller (process id, its torch
        threads)."""

        def __init__(self, *args, record: str, **kw):
            super().__init__(*args, **kw)
            self.record = record

        def _note(self, **kw):
            import json
            import os

            with open(self.record, "a") as f:
                f.write(json.dumps({"pid": os.getpid(), **kw}) + "\n")

        def load_local_model(self):
            import time

            t = time.time()
            model = super().load_local_model()
            self._note(what="load", device=str(model.device), start=t, seconds=time.time() - t)
            return _RecordingModel(model, self.record)

        def run_inference(self, batch, model, inference_args=None):
            import time

            import torch

            self._note(what="caller", threads=torch.get_num_threads(), start=time.time())
            return super().run_inference(batch, model, inference_args)

    return RecordingHandler


def recording_handler(*args, record: str, **kw):
    return _recording_handler_class()(*args, record=record, **kw)


# ------------------------------------------------------------------ figure files as a build meets them

_DECODE_SET: list = []  # (set name, file name, bytes), in the order figure_files gives them
LARGE_SETS = ("arXiv-size png", "arXiv-size jpeg")


def figure_files(large: bool = True) -> list[tuple[str, bytes]]:
    """(name, file bytes) of real figures as a build reads them: the sample's PNGs, the
    corpus TeX trees' PNGs, the corpus PDF figures rasterised as the build does
    (``eprints.rasterize.pdf_to_png`` at its DPI), JPEG re-encodings of all of them (the
    corpus has no real JPEG figure), and with ``large`` arXiv-size versions (longer side
    2400 px, PNG keeping the stored mode, alpha included, and JPEG)."""
    return [(n, d) for kind, n, d in _figure_set_rows() if large or kind not in LARGE_SETS]


def figure_sets() -> dict[str, list[tuple[str, bytes]]]:
    """The files of ``figure_files`` by set: "sample", "corpus png", "corpus pdf",
    "jpeg (re-encoded)", "arXiv-size png", "arXiv-size jpeg" (bench/decode.py reports
    each set)."""
    out: dict[str, list[tuple[str, bytes]]] = {}
    for kind, n, d in _figure_set_rows():
        out.setdefault(kind, []).append((n, d))
    return out


def _figure_set_rows() -> list:
    if not _DECODE_SET:
        files = [("sample", p.name, p.read_bytes()) for p in sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))]
        corpus = corpus_dir()
        if corpus:
            files += [
                ("corpus png", p.name, p.read_bytes())
                for p in sorted((corpus / "tex" / "dd3d" / "figures").glob("**/*.png"))
            ]
            pdfs = [(p.name, p.read_bytes()) for p in sorted((corpus / "tex" / "2603.21852").glob("*.pdf"))]
            tarball = corpus / "tex" / "1709.07020" / "1709.07020v1.tar.gz"
            if tarball.is_file():
                with tarfile.open(tarball) as tf:
                    pdfs += [
                        (m.name, tf.extractfile(m).read())  # type: ignore[union-attr]
                        for m in tf.getmembers()
                        if m.isfile() and m.name.lower().endswith(".pdf")
                    ]
            if shutil.which("pdftoppm"):
                from sciga.transforms.eprints.rasterize import pdf_to_png

                files += [("corpus pdf", f"{n}.png", pdf_to_png(d, n)) for n, d in pdfs]
        jpegs, bigs = [], []
        for _, name, data in files:
            im = Image.open(io.BytesIO(data))
            im.load()
            jpegs.append(("jpeg (re-encoded)", f"{name}.jpg", encode_image(im.convert("RGB"), "JPEG")))
            if max(im.size) >= 400:
                s = 2400 / max(im.size)
                big = im.convert("RGBA" if "transparency" in im.info or im.mode in ("RGBA", "LA") else "RGB")
                big = big.resize((round(im.width * s), round(im.height * s)), Image.Resampling.LANCZOS)
                bigs += [
                    ("arXiv-size png", f"{name}.2400.png", encode_image(big, "PNG")),
                    ("arXiv-size jpeg", f"{name}.2400.jpg", encode_image(big.convert("RGB"), "JPEG")),
                ]
        _DECODE_SET.extend(files + jpegs + bigs)
    return _DECODE_SET


def encode_image(im: Image.Image, fmt: str) -> bytes:
    """``im`` as a PNG or a quality-90 JPEG file."""
    buf = io.BytesIO()
    im.save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buf.getvalue()


def figure_row(data: Optional[bytes] = None, kind: str = "raster", path: str = "x.png"):
    """A figures row of one figure whose image is ``data`` (the vision tests' unit)."""
    from sciga.schemas.records import FigureRow

    return FigureRow(
        id="2401.00001_F1",
        paper_id="2401.00001",
        parent_id=None,
        kind="figure",
        index=1,
        number="1",
        label="Figure 1:",
        caption="",
        subcaption=None,
        subcaption_source=None,
        image_bytes=data,
        image_path=path,
        image_paths=[path] if path else [],
        image_kind=kind,
        image_source="html",
    )
