# Launcher image of the `sciga build` Dataflow Flex Template (the spec: docker/flex-template/).
#
#   docker build -f docker/flex-template.Dockerfile -t REGION-docker.pkg.dev/PROJECT/sciga/launcher:0.1.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/sciga/launcher:0.1.0
#   gcloud dataflow flex-template build gs://BUCKET/templates/sciga-build.json \
#     --image REGION-docker.pkg.dev/PROJECT/sciga/launcher:0.1.0 --sdk-language PYTHON \
#     --metadata-file docker/flex-template/metadata.json
#
# The launcher only builds the job graph and submits it; the workers run the worker image
# (docker/dataflow-worker.Dockerfile, passed as sdk_container_image), which has the same
# package, Python 3.11 and Beam 2.77: the launcher and the workers must agree. No model,
# LaTeXML or torch here: nothing runs a paper in the launcher.
FROM gcr.io/dataflow-templates-base/python311-template-launcher-base

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLEX_TEMPLATE_PYTHON_PY_FILE=/template/launch.py

WORKDIR /template
COPY setup.py README.md ./
COPY sciga ./sciga
COPY docker/flex-template/metadata.json docker/flex-template/launch.py ./
RUN pip install ".[dataflow,publish]" \
 && python -c "from sciga.executors.flex_template import build_argv, load_metadata; \
print(build_argv(['--input=gs://b/p', '--output=gs://b/o'], load_metadata('/template/metadata.json')))"

# The same image runs `sciga update` (harvest, fetch, build on Dataflow, validate, publish)
# as a Cloud Run job: override the entry point with `sciga` (see the README's monthly update).
