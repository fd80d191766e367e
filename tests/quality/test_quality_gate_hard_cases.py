"""The gate on the hard cases: a subcaption that is only its tag fails it, and every failure
example names its row (never "e.g. ?")."""

from __future__ import annotations

from quality_fixtures import rewrite_shard

from sciga.quality.gate import run_gate
from sciga.quality.report import summary_text


def test_a_tag_only_subcaption_fails_the_gate(build_copy):
    def tag_only_row(rows):
        r = next(r for r in rows if r["id"] == "2511.99001_F3.2")
        r["subcaption"] = "<TAG> (b) </TAG>"
        return rows

    def tag_only_caption(rows):
        p = next(p for p in rows if p["id"] == "2511.99001")
        p["figures"][2]["subfigures"][1]["caption"] = "<TAG> (b) </TAG> "
        return rows

    rewrite_shard(build_copy, "figures", tag_only_row)
    rewrite_shard(build_copy, "papers", tag_only_caption)
    result = run_gate(str(build_copy), image_check="none")
    got = {(c.table, c.column): c for c in result.failed}
    assert set(got) == {("figures", "subcaption_has_text"), ("paper_figures", "caption_has_text")}
    assert got[("figures", "subcaption_has_text")].examples == ["2511.99001_F3.2"]
    assert got[("paper_figures", "caption_has_text")].examples == ["2511.99001_F3.2"]


def test_failure_examples_name_rows_that_lack_their_id(build_copy):
    def no_id(rows):
        rows[1]["id"] = None
        return rows

    def title_mention_without_surface(rows):
        r = dict(rows[0])
        r.update(paragraph_index=None, context="title", surface=None)
        return rows + [r]

    rewrite_shard(build_copy, "papers", no_id)
    rewrite_shard(build_copy, "mentions", title_mention_without_surface)
    result = run_gate(str(build_copy), image_check="none")
    text = summary_text(result, max_examples=10)
    assert "e.g. ?" not in text and "e.g. nan" not in text and "#p<NA>" not in text
    (pid,) = [c for c in result.failed if c.table == "papers" and c.column == "id"]
    assert pid.examples == ["(paper without an id: " + pid.examples[0].split(": ", 1)[1]]
    assert pid.examples[0].endswith("2511.99002.html)")
    (surface,) = [c for c in result.failed if c.table == "mentions" and c.column == "surface"]
    assert surface.examples == ["2511.99001:2511.99001_S1 title 2511.99001_S1[290:298] -> 2511.99001_F1"]
