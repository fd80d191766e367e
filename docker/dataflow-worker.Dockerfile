# Worker image for `sciga build` on Dataflow, GPU or CPU workers.
#
#   docker build -f docker/dataflow-worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/sciga/worker:0.1.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/sciga/worker:0.1.0
#   sciga build ... --runner DataflowRunner --sdk_container_image REGION-docker.pkg.dev/PROJECT/sciga/worker:0.1.0
#
# The base is Apache Beam's own SDK image of the exact SDK version the launcher uses
# (2.77, Python 3.11): the launcher and the workers must agree. torch/torchvision from the
# package index are CUDA builds that carry their CUDA runtime; the NVIDIA *driver* comes
# from Dataflow (`worker_accelerator=...;install-nvidia-driver`), so no CUDA base image is
# needed. On a CPU worker the same image runs the CPU path.
FROM apache/beam_python3.11_sdk:2.77.0

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    # Workers never download model weights: a run reads them from gs:// or from a
    # Hugging Face cache baked in below.
    HF_HUB_OFFLINE=1 \
    HF_HOME=/opt/hf

# LaTeXML (our own e-print -> HTML5 conversion, the engine ar5iv runs) with ImageMagick and
# ghostscript for its PDF/EPS figures, and poppler for the TeX-figure stage. Debian's /etc
# ImageMagick policy refuses PDF; each conversion writes its own policy (XDG_CONFIG_HOME),
# so /etc is left as the distribution ships it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
      latexml imagemagick ghostscript poppler-utils \
 && rm -rf /var/lib/apt/lists/* \
 && latexmlc --VERSION

WORKDIR /opt/sciga
COPY setup.py README.md ./
COPY sciga ./sciga
# `fast` (pywuffs, PNG figures ~2x faster) is built from source here: the SDK image has g++.
RUN pip install ".[vision,dataflow,bulk,fast]" \
 && python -c "import sciga.transforms.vision.handlers, torch, torchvision, pywuffs; print('torch', torch.__version__)"

# Optional: bake weights into the image instead of reading them from gs:// at start-up
# (then pass --medical-weights /opt/weights/docfigure-resnet101.pt):
# COPY weights/ /opt/weights/

# The Beam SDK harness is the entry point (inherited from the base image; restated).
ENTRYPOINT ["/opt/apache/beam/boot"]
