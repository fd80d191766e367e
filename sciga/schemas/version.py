"""Versions stamped into every build.

SCHEMA_VERSION changes whenever a column is added, removed, renamed or changes meaning:
a new schema version is a new dataset version, never a silent edit of an old one.
"""

from sciga import __version__ as BUILDER_VERSION

SCHEMA_VERSION = "1.5.0"  # 1.1.0: mentions.panels, ref_spans[].panels, dead_letter.scope
# 1.2.0: figures.image is null without bytes; figures.image_status, figures.image_uri
# 1.3.0: papers.provenance.latexml_errors; figures.image_status "rasterized_svg" (an SVG
#        drawing rasterized to PNG, image_uri: the SVG it was drawn from)
# 1.4.0: papers.withheld (the licence policy, --licences, withheld the paper's content)
# 1.5.0: provenance.input_uri, figures.image_uri and dead_letter.input_uri (and the paths in
#        dead_letter.message, figures.image_error) are relative to the input folder they came
#        from: no absolute path of the build machine is published

__all__ = ["SCHEMA_VERSION", "BUILDER_VERSION"]
