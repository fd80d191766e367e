"""``StageError`` declares every field it carries and keeps them when pickled (Beam's and
Dask's workers send it back to the launcher)."""

from __future__ import annotations

import pickle

from sciga.transforms.common.errors import StageError


def test_a_stage_error_keeps_every_field_when_pickled():
    e = StageError("fetch_html", "no_html", "2401.00001: no HTML", "2401.00001", transient=False, permanent=True)
    back = pickle.loads(pickle.dumps(e))
    assert (back.stage, back.error_type, back.message, back.paper_id, back.transient, back.permanent) == (
        "fetch_html",
        "no_html",
        "2401.00001: no HTML",
        "2401.00001",
        False,
        True,
    )
    assert StageError("parse", "x", "y").permanent is False
