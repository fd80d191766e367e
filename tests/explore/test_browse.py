"""`sciga browse`: the static HTML report of a build. Pure rendering (tokens, mentions,
escaping), the site written from the sample build (local and through an fsspec memory://
build), and the pages opened in a real headless Chromium: screenshots kept in
test-artifacts/browse/, figures decoded, every mention link landing on its figure, nothing
loaded from outside the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import fsspec
from browser_fixtures import ARTIFACTS
from quality_fixtures import rewrite_shard

from sciga.explore.browse import BrowseOptions, browse, image_format
from sciga.explore.browse_render import Ref, group_marks, render_text, safe_name
from sciga.pipelines.cli import main

PAPER = "2511.99001"  # sections, tokens, a teaser, a compound figure with three panels, 10 mentions


# -- pure rendering -------------------------------------------------------------------------


def test_tokens_are_visible_escaped_and_styled():
    html = render_text("a <NOTE> see <MATH> x<y </MATH> </NOTE> <TAG> Figure 2: </TAG> b")
    assert '<span class="tok tok-note">&lt;NOTE&gt;</span>' in html
    assert '<span class="tok tok-math">&lt;/MATH&gt;</span>' in html
    assert '<span class="in-note in-math"> x&lt;y </span>' in html  # MATH nested in NOTE
    assert '<span class="in-tag"> Figure 2: </span>' in html
    assert html.endswith(" b")


def test_paper_text_is_escaped():
    html = render_text('<script>alert(1)</script> <img src=x onerror=alert(2)> "q" & <MATH> a </MATH>')
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&quot;q&quot; &amp;" in html


def test_marks_group_same_spans_and_keep_every_ref():
    text = "See Figs. 4a-c and Figure 2 here."
    spans = [
        (4, 14, Ref("p_F4.1", "Figs. 4a-c", "text", "fig-p_F4.1")),
        (4, 14, Ref("p_F4.2", "Figs. 4a-c", "text", "fig-p_F4.2")),
        (10, 12, Ref("p_F4.3", "4a", "text", "fig-p_F4.3")),  # overlaps the first: joins it
        (19, 27, Ref("p_F2", "Figure 2", "anchor", "fig-p_F2")),
        (40, 45, Ref("p_F9", "Fig. 9", "text", None)),
    ]  # outside the text
    marks, outside = group_marks(text, spans, "m-x")
    assert [(m.start, m.end, [r.figure_id for r in m.refs]) for m in marks] == [
        (4, 14, ["p_F4.1", "p_F4.2", "p_F4.3"]),
        (19, 27, ["p_F2"]),
    ]
    assert [r.figure_id for r in outside] == ["p_F9"]
    html = render_text(text, marks, outside)
    assert html.count('class="ref ') == 4 and html.count("unresolved") == 1  # every mention row has its link
    assert '<a class="ref mention" id="m-x-m1" href="#fig-p_F4.1"' in html
    assert html.index("Figs. 4a-c") < html.index('href="#fig-p_F4.2"')


def test_mark_crossing_a_token_still_nests():
    text = "x <MATH> a </MATH> Fig. 3 y"
    marks, _ = group_marks(text, [(5, 22, Ref("p_F3", "?", "text", "fig-p_F3"))], "m")
    html = render_text(text, marks)
    from html.parser import HTMLParser

    class Check(HTMLParser):
        stack: list = []

        def handle_starttag(self, tag, attrs):
            self.stack.append(tag)

        def handle_endtag(self, tag):
            assert self.stack.pop() == tag

    c = Check()
    c.feed(html)
    assert c.stack == []


def test_image_format_and_safe_names():
    assert image_format(b"\x89PNG\r\n\x1a\n....") == ("png", True)
    assert image_format(b"\xff\xd8\xff\xe0") == ("jpg", True)
    assert image_format(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == ("webp", True)
    assert image_format(b"  <?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'/>") == ("svg", True)
    assert image_format(b"II*\x00") == ("tif", False) and image_format(b"%PDF-1.5") == ("pdf", False)
    assert safe_name("2511.99001") == "2511.99001"
    assert safe_name("q-bio/0601999") != safe_name("q-bio_0601999") and "/" not in safe_name("q-bio/0601999")


# -- the site ---------------------------------------------------------------------------------


def _site(build: Path, out: Path, *extra) -> Path:
    assert main(["browse", str(build), "--output", str(out), *extra]) == 0
    return out


def test_site_layout_limits_and_determinism(sample_build, tmp_path, capsys):
    site = _site(sample_build, tmp_path / "site")
    out = capsys.readouterr().out
    assert "paper pages        4 of 4 papers" in out and "images            23 (" in out
    pages = sorted(p.name for p in (site / "papers").iterdir())
    assert pages == ["2511.99001.html", "2511.99002.html", "2511.99003.html", f"{safe_name('q-bio/0601999')}.html"]
    assert len(list((site / "images").rglob("*.png"))) == 23
    html = (site / "papers" / f"{PAPER}.html").read_text()
    assert "http://" not in html.replace("http://creativecommons.org", "") and "https://" not in html  # nothing remote
    assert "<script" not in html

    again = _site(sample_build, tmp_path / "again")
    for p in site.rglob("*"):
        if p.is_file():
            assert p.read_bytes() == (again / p.relative_to(site)).read_bytes(), p  # same build, same bytes

    two = _site(sample_build, tmp_path / "two", "--papers", "2")
    assert sorted(p.name for p in (two / "papers").iterdir()) == ["2511.99001.html", "2511.99002.html"]
    assert "pages for <b>2</b> of 4 papers" in (two / "index.html").read_text()

    one = _site(sample_build, tmp_path / "one", "--paper", "2511.99003")
    assert [p.name for p in (one / "papers").iterdir()] == ["2511.99003.html"]
    assert main(["browse", str(sample_build), "--output", str(tmp_path / "x"), "--paper", "9999.00001"]) == 1
    assert "not in" in capsys.readouterr().err


def test_default_output_is_inside_the_build(build_copy):
    assert main(["browse", str(build_copy)]) == 0
    assert (build_copy / "browse" / "index.html").is_file()


def test_build_and_site_on_fsspec_paths(sample_build, tmp_path):
    """Nothing goes through os paths: a build in fsspec's memory filesystem gives the same
    site, written to memory as well."""
    mem = fsspec.filesystem("memory")
    for p in sample_build.rglob("*"):
        if p.is_file():
            mem.pipe(f"/sciga-browse-test/build/{p.relative_to(sample_build).as_posix()}", p.read_bytes())
    try:
        res = browse(BrowseOptions(out="memory://sciga-browse-test/build", output="memory://sciga-browse-test/site"))
        assert len(res.pages) == 4 and res.images == 23
        local = _site(sample_build, tmp_path / "local")
        for p in local.rglob("*"):
            if p.is_file():
                assert mem.cat_file(f"/sciga-browse-test/site/{p.relative_to(local).as_posix()}") == p.read_bytes(), p
    finally:
        mem.rm("/sciga-browse-test", recursive=True)


def test_dead_letters_and_hostile_text_in_the_index(build_copy, tmp_path):
    def add_dead(rows):
        return rows + [
            {
                "paper_id": None,
                "stage": "parse",
                "error_type": "not_latexml",
                "message": "broken.html is not LaTeXML output (no ltx_page_main); convert it with LaTeXML first",
                "input_uri": "/in/broken.html",
            },
            {
                "paper_id": "2511.99002",
                "stage": "parse",
                "error_type": "duplicate",
                "message": "2511.99002v1 is an older copy of 2511.99002v2 <script>alert(1)</script>",
                "input_uri": "/in/old.html",
            },
        ]

    rewrite_shard(build_copy, "dead_letter", add_dead)

    def hostile(rows):
        for r in rows:
            if r["id"] == "2511.99001_F2":
                r["caption"] = r["caption"] + " <script>alert('x')</script>"
        return rows

    rewrite_shard(build_copy, "figures", hostile)
    site = _site(build_copy, tmp_path / "site")
    index = (site / "index.html").read_text()
    assert "Dead letters (2)" in index
    assert "is not LaTeXML output (no ltx_page_main); convert it with LaTeXML first" in index and "not_latexml" in index
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in index and "<script>" not in index
    row = index[index.index("2511.99002.html") :].split("</tr>")[0]
    assert "parse: duplicate" in row  # the paper's own dead letters in its index row
    page = (site / "papers" / "2511.99001.html").read_text()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page and "<script>" not in page
    assert "Dead letters of this paper" in (site / "papers" / "2511.99002.html").read_text()


# -- in a real browser -------------------------------------------------------------------------


def _expected(build: Path, paper: str) -> dict:
    from sciga.explore.views import connect

    con = connect(str(build))
    one = lambda sql: con.execute(sql, [paper]).fetchone()[0]
    return {
        "mentions": one("SELECT count(*) FROM mentions WHERE paper_id = ?"),
        "images": one("SELECT count(*) FROM figures WHERE paper_id = ? AND image.bytes IS NOT NULL"),
        "figure_ids": sorted(
            r[0] for r in con.execute("SELECT id FROM figures WHERE paper_id = ?", [paper]).fetchall()
        ),
        "subcaptions": [
            r[0]
            for r in con.execute(
                "SELECT subcaption FROM figures WHERE paper_id = ? AND subcaption IS NOT NULL ORDER BY id", [paper]
            ).fetchall()
        ],
    }


DOM_FACTS = r"""(() => {
  const imgs = [...document.querySelectorAll('figure img')];
  const gaThumbs = [...document.querySelectorAll('.ga-box img.ga-thumb')];
  const refs = [...document.querySelectorAll('a.ref')];
  const figs = [...document.querySelectorAll('figure.fig, figure.sub')];
  return {
    images: imgs.length,
    images_decoded: imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length,
    images_shown: imgs.filter(i => { const r = i.getBoundingClientRect(); return r.width > 20 && r.height > 20; }).length,
    ga_thumbs: gaThumbs.length,
    ga_thumbs_decoded: gaThumbs.filter(i => i.naturalWidth > 0).length,
    refs: refs.length,
    refs_to_figures: refs.filter(a => { const t = document.getElementById(a.getAttribute('href').slice(1));
                                       return t && t.tagName === 'FIGURE' && t.id === 'fig-' + a.dataset.figure; }).length,
    unresolved: document.querySelectorAll('.unresolved').length,
    figure_ids: figs.map(f => f.id.slice(4)).sort(),
    math_tokens: document.querySelectorAll('.tok-math').length,
    note_tokens: document.querySelectorAll('.tok-note').length,
    tag_tokens: document.querySelectorAll('.tok-tag').length,
    first_token_text: (document.querySelector('.tok-math') || {}).textContent,
    math_color: getComputedStyle(document.querySelector('.tok-math')).backgroundColor,
    mention_bg: getComputedStyle(document.querySelector('a.mention')).backgroundColor,
    ga: document.querySelector('.ga-box').innerText,
    text: document.body.innerText,
  };
})()"""


def test_paper_pages_in_chromium(sample_build, tmp_path, browser):
    site = _site(sample_build, tmp_path / "site")
    shots = ARTIFACTS / "browse"
    if shots.exists():
        shutil.rmtree(shots)
    page = browser.new_page()

    for paper in (PAPER, "2511.99003"):
        exp = _expected(sample_build, paper)
        page.navigate((site / "papers" / f"{paper}.html").as_uri())
        facts = page.evaluate(DOM_FACTS)
        shot = page.screenshot(shots / f"{paper}.png")
        assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        assert facts["images"] == exp["images"] and facts["images_decoded"] == exp["images"], facts
        assert facts["images_shown"] == exp["images"]
        assert facts["figure_ids"] == exp["figure_ids"]  # every figure and subfigure has its element
        assert facts["refs"] == exp["mentions"]  # one link per mention row
        assert facts["refs_to_figures"] == exp["mentions"] and facts["unresolved"] == 0
        for sub in exp["subcaptions"]:  # every subcaption is shown (after its <TAG> label token)
            assert sub.split("</TAG>")[-1].strip() in facts["text"]
        assert facts["math_tokens"] > 0 and facts["first_token_text"] in ("<MATH>", "</MATH>")
        assert facts["math_color"] != "rgba(0, 0, 0, 0)" and facts["mention_bg"] != "rgba(0, 0, 0, 0)"  # styled
        assert "GA type: de facto" in facts["ga"]
        assert facts["ga_thumbs"] == facts["ga_thumbs_decoded"] == 1  # the GA's component, shown

        # Following a mention lands on its figure.
        target = page.evaluate(
            "(() => { const a = document.querySelector('a.mention'); a.click(); "
            "return [location.hash, document.querySelector(':target').id]; })()"
        )
        assert target[0] == "#" + target[1]

    facts = page.evaluate(DOM_FACTS)  # 2511.99003: the medical paper
    assert (
        "keywords: MRI" in facts["text"]
        and "medical? classifier not run" in facts["text"]
        and "image file figs/attention_maps.png not found" in facts["text"]
    )

    page.navigate((site / "index.html").as_uri())
    index = page.evaluate("""(() => ({
        rows: document.querySelectorAll('table.papers tr').length - 1,
        links: [...document.querySelectorAll('table.papers a')].map(a => a.getAttribute('href')),
        thumbs: [...document.querySelectorAll('img.thumb')].filter(i => i.naturalWidth > 0).length,
        text: document.body.innerText }))()""")
    page.screenshot(shots / "index.png")
    assert index["rows"] == 4 and all((site / h).is_file() for h in index["links"])
    assert index["thumbs"] == 3  # the q-bio paper has no figures
    assert "Dead letters (0)" in index["text"] and "de facto (teaser)" in index["text"]

    outside = [u for u in page.requested_urls() if not u.startswith(("file://", "data:", "about:"))]
    assert outside == []  # no server, no internet
    assert (ARTIFACTS / "browse" / f"{PAPER}.png").is_file()


def test_duckdb_reads_stay_per_chunk(sample_build, tmp_path, monkeypatch):
    """Each chunk of papers is one query per config with the chunk's ids, never a full read."""
    seen = []
    from sciga.explore import browse as mod

    real = mod._rows

    def spy(cur, sql, params=()):
        seen.append((sql.split(" FROM ")[1].split()[0], len(params)))
        return real(cur, sql, params)

    monkeypatch.setattr(mod, "_rows", spy)
    res = browse(BrowseOptions(out=str(sample_build), output=str(tmp_path / "chunked"), chunk=3))
    assert len(res.pages) == json.loads((sample_build / "manifest.json").read_text())["counts"]["papers"] == 4
    assert seen == [(c, 3) for c in ("papers", "figures", "mentions", "dead_letter")] + [
        (c, 1) for c in ("papers", "figures", "mentions", "dead_letter")
    ]
