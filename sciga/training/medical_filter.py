"""`sciga train medical-filter`: the DocFigure classifier behind MedICaT's stage 2.

MedICaT (seed 004) trained a ResNet-101, ImageNet-initialised, on DocFigure (33K figures,
28 classes) and kept a figure when "Medical" is among the top K = 4 predictions. This job
trains that classifier and writes the checkpoint ``sciga build --medical-weights`` loads.

Data (``--data DIR``), either layout:

* **ImageFolder**: ``DIR/<class name>/*.png`` (optionally ``DIR/train/<class>/`` and
  ``DIR/test/<class>/``, the latter then being the held-out split);
* **DocFigure list files**: ``train.txt`` / ``test.txt`` (in ``DIR`` or ``DIR/annotation``)
  with one ``image name, class name`` per line (comma or tab; a class number 0-27 is read
  as DocFigure's order), images in ``DIR/images`` or beside the lists.

Without a test split, a stratified, seeded split holds out ``--test-share`` of the data;
``--val-share`` of the rest drives early stopping. The model: a torchvision ``--arch``
(default resnet101) with random weights, or ImageNet weights from ``--init-weights PATH``
(a local state dict you downloaded, e.g. torchvision's resnet101 file; nothing is ever
downloaded), then dropout 0.1 and a linear head; Adam; early stopping on validation
macro-F1 with ``--patience`` epochs. The report (printed and stored in the checkpoint) has
per-class F1 on the held-out split and the precision / recall of the rule "Medical in the
top K" for K = 1..5.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from sciga.training.options import MedicalFilterOptions, options_from

HELP = "train the DocFigure classifier of the MedICaT medical filter (writes --medical-weights)"
log = logging.getLogger("sciga.train")
_IMG_EXT = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", required=True, metavar="DOCFIGURE_DIR", help="ImageFolder or DocFigure list-file layout")
    ap.add_argument("--output", required=True, metavar="WEIGHTS", help="checkpoint to write (.pt)")
    ap.add_argument("--arch", default="resnet101", help="torchvision architecture (resnet101, resnet50, resnet18, ...)")
    ap.add_argument(
        "--init-weights", metavar="PATH", default=None, help="ImageNet state dict of --arch to start from (local file)"
    )
    ap.add_argument(
        "--epochs", type=int, default=20, help="most passes over the training data (early stopping may end sooner)"
    )
    ap.add_argument("--batch-size", type=int, default=32, help="images per optimiser step")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate")
    ap.add_argument("--patience", type=int, default=3, help="early stopping: epochs without validation gain")
    ap.add_argument("--input-size", type=int, default=224, help="images are resized to this many pixels square")
    ap.add_argument("--dropout", type=float, default=0.1, help="dropout before the classification head")
    ap.add_argument("--test-share", type=float, default=0.2, help="held-out share when the data has no test split")
    ap.add_argument("--val-share", type=float, default=0.1, help="validation share of the training data")
    ap.add_argument("--top-k", type=int, default=4, help="K of the Medical rule reported first")
    ap.add_argument("--seed", type=int, default=0, help="random seed (splits, initialisation, batches)")
    ap.add_argument("--workers", type=int, default=0, help="data loader processes")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to train")
    ap.add_argument("--report", metavar="FILE.json", default=None, help="also write the evaluation report here")


# ------------------------------------------------------------------ data


@dataclass
class Dataset:
    labels: list[str]
    train: list[tuple[str, int]]
    test: Optional[list[tuple[str, int]]]  # None: split off here


def _norm(label: str) -> str:
    words = re.sub(r"[^a-z0-9 ]", " ", label.lower()).split()
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def _canonical_labels(names: Sequence[str]) -> list[str]:
    """DocFigure's order when the names are DocFigure classes, else sorted."""
    from sciga.transforms.vision.medical import DOCFIGURE_LABELS

    canon = {_norm(c): c for c in DOCFIGURE_LABELS}
    if all(_norm(n) in canon for n in names):
        present = {_norm(n) for n in names}
        return [c for c in DOCFIGURE_LABELS if _norm(c) in present]
    return sorted(set(names))


def _image_folder(root: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for cls in sorted(os.listdir(root)):
        d = os.path.join(root, cls)
        if not os.path.isdir(d):
            continue
        for r, _, fs in os.walk(d):
            out.extend((os.path.join(r, f), cls) for f in sorted(fs) if f.lower().endswith(_IMG_EXT))
    return out


def _read_list(path: str, image_dirs: Sequence[str]) -> list[tuple[str, str]]:
    from sciga.transforms.vision.medical import DOCFIGURE_LABELS

    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, label = line.rpartition("\t") if "\t" in line else line.rpartition(",")
            if not sep:
                raise ValueError(f"{path} line {n}: expected 'image name, class name'")
            name, label = name.strip().strip('"'), label.strip().strip('"')
            if label.isdigit():
                label = DOCFIGURE_LABELS[int(label)]
            img = next((os.path.join(d, name) for d in image_dirs if os.path.isfile(os.path.join(d, name))), None)
            if img is None:
                raise FileNotFoundError(f"{path} line {n}: image {name} not found in {', '.join(image_dirs)}")
            out.append((img, label))
    return out


def load_dataset(root: str) -> Dataset:
    if not os.path.isdir(root):
        raise FileNotFoundError(f"training data folder {root} does not exist")
    for lists in (root, os.path.join(root, "annotation"), os.path.join(root, "annotations")):
        train_list = os.path.join(lists, "train.txt")
        if os.path.isfile(train_list):
            dirs = [os.path.join(root, "images"), lists, root]
            train = _read_list(train_list, dirs)
            test_list = os.path.join(lists, "test.txt")
            test = _read_list(test_list, dirs) if os.path.isfile(test_list) else None
            break
    else:
        if os.path.isdir(os.path.join(root, "train")):
            train = _image_folder(os.path.join(root, "train"))
            test = _image_folder(os.path.join(root, "test")) if os.path.isdir(os.path.join(root, "test")) else None
        else:
            train, test = _image_folder(root), None
    if not train:
        raise ValueError(f"no labelled images found in {root}; use DIR/<class>/*.png or DocFigure's train.txt")
    labels = _canonical_labels([lab for _, lab in train + (test or [])])
    index = {_norm(label): i for i, label in enumerate(labels)}

    def enc(items):
        return [(p, index[_norm(lab)]) for p, lab in items]

    return Dataset(labels=labels, train=enc(train), test=enc(test) if test is not None else None)


def stratified_split(items: list[tuple[str, int]], share: float, seed: int) -> tuple[list, list]:
    """(kept, held out): ``share`` of each class held out (at least one when a class has
    two or more items), reproducibly."""
    rng = random.Random(seed)
    by: dict[int, list] = {}
    for it in items:
        by.setdefault(it[1], []).append(it)
    keep, out = [], []
    for y in sorted(by):
        group = sorted(by[y])
        rng.shuffle(group)
        n = int(round(len(group) * share))
        if len(group) >= 2:
            n = min(max(n, 1), len(group) - 1)
        else:
            n = 0
        out.extend(group[:n])
        keep.extend(group[n:])
    return keep, out


class _Images:
    """torch Dataset over (path, label): our decoder (pixel limit) + shared preprocessing."""

    def __init__(self, items, input_size: int, mean, std):
        self.items, self.input_size, self.mean, self.std = items, input_size, mean, std

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        import torch

        from sciga.transforms.vision.decode import decode_image
        from sciga.transforms.vision.models import preprocess_array

        path, y = self.items[i]
        with open(path, "rb") as f:
            img = decode_image(f.read(), draft_size=(self.input_size * 2, self.input_size * 2)).image
        return torch.from_numpy(preprocess_array(img, self.input_size, self.mean, self.std)), y


# ------------------------------------------------------------------ metrics


def per_class_f1(y_true: Sequence[int], y_pred: Sequence[int], labels: Sequence[str]) -> dict:
    out = {}
    yt, yp = np.asarray(y_true), np.asarray(y_pred)
    for i, lab in enumerate(labels):
        tp = int(((yp == i) & (yt == i)).sum())
        fp = int(((yp == i) & (yt != i)).sum())
        fn = int(((yp != i) & (yt == i)).sum())
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        out[lab] = {
            "precision": round(p, 4),
            "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "support": int((yt == i).sum()),
        }
    return out


def medical_rule_metrics(
    y_true: Sequence[int], probs: np.ndarray, medical: int, ks: Sequence[int] = (1, 2, 3, 4, 5)
) -> dict:
    """Precision / recall of "Medical in the top K" against "the true class is Medical"."""
    yt = np.asarray(y_true) == medical
    order = np.argsort(-probs, axis=1, kind="stable")
    out = {}
    for k in ks:
        pred = (order[:, :k] == medical).any(axis=1)
        tp, fp, fn = int((pred & yt).sum()), int((pred & ~yt).sum()), int((~pred & yt).sum())
        out[str(k)] = {
            "precision": round(tp / (tp + fp), 4) if tp + fp else 0.0,
            "recall": round(tp / (tp + fn), 4) if tp + fn else 0.0,
            "predicted": int(pred.sum()),
            "positives": int(yt.sum()),
        }
    return out


def _macro_f1(report: dict) -> float:
    vals = [v["f1"] for v in report.values() if v["support"]]
    return float(np.mean(vals)) if vals else 0.0


# ------------------------------------------------------------------ training


def _predict(model, loader, device):
    import torch

    model.eval()
    ys: list[int] = []
    ps: list[np.ndarray] = []
    with torch.no_grad():
        for x, y in loader:
            ps.append(torch.softmax(model(x.to(device)).float(), 1).cpu().numpy())
            ys.extend(int(v) for v in y)
    return np.asarray(ys), (np.concatenate(ps) if ps else np.zeros((0, 0)))


def train(args: MedicalFilterOptions) -> dict:
    import torch
    from torch.utils.data import DataLoader

    from sciga.transforms.vision.medical import medical_label
    from sciga.transforms.vision.models import (
        IMAGENET_MEAN,
        IMAGENET_STD,
        CheckpointMeta,
        build_model,
        pick_device,
        save_checkpoint,
    )

    t0 = time.time()
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    data = load_dataset(args.data)
    labels = data.labels
    med = labels.index(medical_label(labels))
    if data.test is None:
        train_items, test_items = stratified_split(data.train, args.test_share, args.seed)
    else:
        train_items, test_items = data.train, data.test
    train_items, val_items = stratified_split(train_items, args.val_share, args.seed + 1)
    if not train_items or not test_items:
        raise ValueError(f"{args.data}: too few images to hold out a test split ({len(data.train)} images)")
    device = pick_device(args.device)
    log.info(
        "%d classes; %d train / %d validation / %d test images; %s on %s",
        len(labels),
        len(train_items),
        len(val_items),
        len(test_items),
        args.arch,
        device,
    )

    model = build_model(args.arch, len(labels), args.dropout, args.init_weights).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    def ds(items):
        return _Images(items, args.input_size, IMAGENET_MEAN, IMAGENET_STD)

    g = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(
        ds(train_items), batch_size=args.batch_size, shuffle=True, generator=g, num_workers=args.workers
    )
    val_loader = DataLoader(ds(val_items or train_items), batch_size=args.batch_size, num_workers=args.workers)
    test_loader = DataLoader(ds(test_items), batch_size=args.batch_size, num_workers=args.workers)

    best, best_state, stale, history = -1.0, None, 0, []
    for epoch in range(1, args.epochs + 1):
        model.train()
        total, n = 0.0, 0
        for x, y in train_loader:
            opt.zero_grad()
            loss = loss_fn(model(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
            n += len(y)
        yv, pv = _predict(model, val_loader, device)
        f1 = _macro_f1(per_class_f1(yv, pv.argmax(1), labels))
        history.append({"epoch": epoch, "train_loss": round(total / max(n, 1), 4), "val_macro_f1": round(f1, 4)})
        log.info("epoch %d: train loss %.4f, validation macro-F1 %.4f", epoch, total / max(n, 1), f1)
        if f1 > best:
            best, stale = f1, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= args.patience:
                log.info("early stop after epoch %d (no validation gain for %d epochs)", epoch, stale)
                break
    model.load_state_dict(best_state)
    yt, pt = _predict(model, test_loader, device)
    report = {
        "arch": args.arch,
        "labels": labels,
        "medical_label": labels[med],
        "images": {"train": len(train_items), "validation": len(val_items), "test": len(test_items)},
        "epochs_run": len(history),
        "history": history,
        "best_val_macro_f1": round(best, 4),
        "test_accuracy": round(float((pt.argmax(1) == yt).mean()), 4),
        "test_per_class": (per_class := per_class_f1(yt, pt.argmax(1), labels)),
        "medical_rule": medical_rule_metrics(yt, pt, med),
        "top_k": args.top_k,
        "seconds": round(time.time() - t0, 1),
    }
    report["test_macro_f1"] = round(_macro_f1(per_class), 4)
    meta = CheckpointMeta(
        arch=args.arch,
        labels=labels,
        input_size=args.input_size,
        dropout=args.dropout,
        metrics={k: report[k] for k in ("test_accuracy", "test_macro_f1", "medical_rule", "images", "epochs_run")},
    )
    save_checkpoint(args.output, model.cpu(), meta)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, sort_keys=True)
    return report


def format_report(report: dict) -> str:
    lines = [
        f"medical-filter classifier ({report['arch']}): test accuracy {report['test_accuracy']:.3f}, "
        f"macro-F1 {report['test_macro_f1']:.3f} on {report['images']['test']} held-out images "
        f"({report['epochs_run']} epochs, {report['seconds']} s)",
        "",
        "per-class F1 (held-out):",
    ]
    for lab, v in report["test_per_class"].items():
        lines.append(f"  {lab:<18} F1 {v['f1']:.3f}  P {v['precision']:.3f}  R {v['recall']:.3f}  n={v['support']}")
    lines += ["", f"rule '{report['medical_label']}' in top K (held-out):"]
    for k, v in report["medical_rule"].items():
        mark = "  <- --medical-top-k" if int(k) == report["top_k"] else ""
        lines.append(f"  K={k}: precision {v['precision']:.3f}  recall {v['recall']:.3f}{mark}")
    return "\n".join(lines)


def run(args) -> int:
    """The command line: flags in, a MedicalFilterOptions to ``train``."""
    from sciga.transforms.vision.models import WeightsError

    try:
        report = train(options_from(MedicalFilterOptions, args))
    except (ValueError, WeightsError) as e:
        print(f"sciga train medical-filter: {e}")
        return 2
    print(format_report(report))
    print(f"\nwrote {args.output} (use it with: sciga build --medical-weights {args.output})")
    return 0
