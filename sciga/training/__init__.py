"""Downstream jobs on a build: SciGA's Intra-GA and Inter-GA recommendation benchmarks.

    metrics.py       R@k, MRR, CAR@k, Field-P@k, SBERT@k, CLIP-S@k (per query and vectorized)
    splits.py        hash-based 8:1:1 split by paper id, the experiment subset
    captions.py      caption cleaning (no labels, no figure numbers)
    ground_truth.py  the (de-facto) GA of a paper and its candidate figures
    data.py          streaming readers of the Parquet shards
    abs2cap.py       (i) BM25 / ROUGE-L            ga_bc.py     (ii) GA / not-GA classifier
    abs2fig.py       (iii)/(iv) dual encoder       losses.py    InfoNCE intra/inter, class weights
    models/          torchvision classifier, dual encoders (tiny, open_clip, HF CLIP)
    loop.py          shuffle buffer, optimisation with AMP, model files
    jobs.py          `sciga train` / `sciga evaluate`     results.py   Tables 2 and 3 (JSON + Markdown)
    options.py       TrainOptions, EvalOptions, MedicalFilterOptions: what the jobs take

The command-line flags that fill those options are in pipelines/train.py and pipelines/evaluate.py.
"""
