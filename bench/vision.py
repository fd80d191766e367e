"""Benchmark: figures per second through decode + preprocess + model on CPU, batched vs.
one image at a time, in the same run; and the share of time spent decoding.

    python bench/vision.py [--arch resnet101] [--images 32] [--batch 16] [--input-size 224]

The images are real figure files (the embedded samples, and the corpus TeX figures when
../shared/corpus is there), cycled to ``--images``. The model is ``--arch`` with random
weights saved as a sciga checkpoint and run through the same ``FigureModelHandler`` the
build uses (RunInference's handler; the Beam runner's own overhead is not in these numbers).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: `sciga` is the folder beside bench/

import sciga  # noqa: E402,F401


def figure_files() -> list[bytes]:
    files = sorted((ROOT / "samples" / "html").glob("*/figs/*.png"))
    from paths import corpus_dir

    corpus = corpus_dir()
    if corpus is not None:
        files += sorted((corpus / "tex" / "dd3d" / "figures").glob("**/*.png"))
    return [f.read_bytes() for f in files]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="resnet101")
    ap.add_argument("--images", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--input-size", type=int, default=224)
    args = ap.parse_args()

    import torch

    from sciga.transforms.vision.decode import decode_image
    from sciga.transforms.vision.handlers import FigureModelHandler
    from sciga.transforms.vision.medical import DOCFIGURE_LABELS
    from sciga.transforms.vision.models import CheckpointMeta, build_model, preprocess, save_checkpoint

    blobs = figure_files()
    data = [blobs[i % len(blobs)] for i in range(args.images)]
    size = args.input_size
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, "bench.pt")
        torch.manual_seed(0)
        save_checkpoint(weights, build_model(args.arch, 28, 0.1), CheckpointMeta(arch=args.arch, labels=list(DOCFIGURE_LABELS), input_size=size))
        handler = FigureModelHandler(weights, "classify", "cpu", max_batch_size=args.batch)
        model = handler.load_model()

        def prep(blob):
            t0 = time.perf_counter()
            img = decode_image(blob, draft_size=(2 * size, 2 * size)).image
            t1 = time.perf_counter()
            x = preprocess(img, size)
            return x, t1 - t0, time.perf_counter() - t1

        # warm-up (first conv call allocates, oneDNN picks kernels)
        list(handler.run_inference([prep(data[0])[0]] * 2, model))

        def run(batch: int) -> dict:
            dec = pre = inf = 0.0
            t_all = time.perf_counter()
            for i in range(0, len(data), batch):
                xs = []
                for blob in data[i:i + batch]:
                    x, d, p = prep(blob)
                    xs.append(x)
                    dec, pre = dec + d, pre + p
                t0 = time.perf_counter()
                list(handler.run_inference(xs, model))
                inf += time.perf_counter() - t0
            total = time.perf_counter() - t_all
            return {"batch": batch, "total": total, "decode": dec, "preprocess": pre, "model": inf, "ips": len(data) / total}

        single = run(1)
        batched = run(args.batch)

    threads = torch.get_num_threads()
    print(f"### vision benchmark: {args.arch} @ {size}px, {len(data)} real figure images "
          f"({len(blobs)} distinct files), CPU, {threads} torch threads, {os.cpu_count()} cores\n")
    print("| mode | images/s | decode ms/img | preprocess ms/img | model ms/img | decode share | decode+preprocess share |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in (("one image at a time", single), (f"batched ({args.batch})", batched)):
        n = len(data)
        print(f"| {name} | {r['ips']:.2f} | {1000 * r['decode'] / n:.1f} | {1000 * r['preprocess'] / n:.1f} | "
              f"{1000 * r['model'] / n:.1f} | {100 * r['decode'] / r['total']:.1f} % | {100 * (r['decode'] + r['preprocess']) / r['total']:.1f} % |")
    print(f"\nbatched / one-at-a-time throughput: {batched['ips'] / single['ips']:.2f}x")


if __name__ == "__main__":
    main()
