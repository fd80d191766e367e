"""Flags declared once (``pipelines/flags.py``): the parser and the typed flags come from the
same dataclass fields; `sciga build` records exactly the options it recorded before (the
manifest's ``options`` and the up-to-date check read them); `sciga update` hands the build
typed options made from its saved flags, never a command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar, Optional

import pytest

from sciga.pipelines.build import BuildFlags, add_arguments, build_flags, build_options, build_options_from_args
from sciga.pipelines.flags import add_flags, flag, flag_values, flags_of, from_args, replace_flags

# The manifest's ``options`` keys of a build before the flags were declared once (builder 0.1.3).
RECORDED_BEFORE = """arxiv_api_url device eprint_base_url eprints_bulk fetch_cache fetch_workers figures_per_shard
ga_crop_reused_area ga_embed_part ga_embed_reused ga_embedding_weights ga_manifest ga_max_mb ga_part_ncc ga_reused_ncc
ga_reused_phash_bits ga_soft_ncc ga_timeout html_base_url html_from latexml_max_memory_gb latexml_timeout max_image_mb
max_image_pixels max_page_mb max_retries medical_classify medical_keywords medical_top_k medical_weights metadata
no_images no_tex papers_per_shard rasterize_dpi rasterize_max_side rasterize_timeout rate_limit rebuild retry_backoff
sample sentencizer source tex_input tex_match_threshold tex_number_min_jaccard timeout vision_batch_size
vision_min_batch_size vision_model_copies vision_precision vision_share_model vision_torch_threads workers""".split()
# Added since: the licence policy (issue 46) changes which rows are written, so it is recorded.
RECORDED_SINCE = ["assume_licence", "licences"]


@dataclass(frozen=True)
class Inner:
    GROUP: ClassVar[str] = "inner things"

    depth: int = flag("--depth", default=3, type=int, help="how deep (default %(default)s)")


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: str = flag("--name", required=True, help="a name", recorded=False)
    tags: list[str] = flag("--tag", default=[], action="append", help="repeatable")
    maybe: Optional[str] = flag("--maybe", help="optional")
    inner: Inner = flags_of(Inner)


def test_one_declaration_makes_the_parser_and_the_typed_flags():
    ap = argparse.ArgumentParser()
    add_flags(ap, Outer)
    assert [g.title for g in ap._action_groups][-1] == "inner things"
    got = from_args(Outer, ap.parse_args(["--name", "x", "--tag", "a", "--tag", "b", "--depth", "5"]))
    assert got == Outer(name="x", tags=["a", "b"], inner=Inner(depth=5))
    assert from_args(Outer, ap.parse_args(["--name", "y"])).tags == []  # the default list is not shared
    assert flag_values(got, recorded_only=True) == {"tags": ["a", "b"], "maybe": None, "depth": 5}
    assert replace_flags(got, depth=7, maybe="m").inner.depth == 7
    with pytest.raises(SystemExit):
        ap.parse_args([])  # --name is required
    with pytest.raises(TypeError):
        replace_flags(got, nosuch=1)


def test_the_build_records_the_options_it_recorded_before(tmp_path):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    opts = build_options_from_args(ap.parse_args(["--sample", "--output", str(tmp_path / "o")]))
    # since (issue 43): --ga-allow-outside changes which GA images are read; (issue 46) the licence policy
    assert sorted(opts.recorded) == sorted(RECORDED_BEFORE + RECORDED_SINCE + ["ga_allow_outside"])
    assert opts.recorded["licences"] == "all" and opts.recorded["assume_licence"] is None  # the default, as applied
    assert opts.recorded["sample"] is True and opts.recorded["metadata"].endswith("samples/meta")
    assert opts.executor == "auto" and opts.dask_address is None  # not recorded: they change no byte
    ids = build_options_from_args(ap.parse_args(["--ids", "2401.00001", "--output", "gs://b/o", "--executor", "beam"]))
    assert ids.fetch_ids == ("2401.00001",) and ids.recorded["fetch_cache"] == "gs://b/o/fetch_cache"
    assert ids.fetch is not None and ids.fetch.store == "gs://b/o/fetch_cache" and ids.executor == "beam"


def test_update_turns_its_saved_build_flags_into_typed_options(tmp_path):
    flags, beam = build_flags(["--no-tex", "--workers", "2", "--runner", "DirectRunner"])
    assert beam == ["--runner", "DirectRunner"] and flags.output is None
    flags = replace_flags(flags, output=str(tmp_path / "o"), input=[str(tmp_path)], quiet=True)
    opts = build_options(flags)
    assert isinstance(flags, BuildFlags) and not opts.tex.enabled and opts.workers == 2 and opts.quiet
    assert opts.specs == (str(tmp_path),) and opts.output == str(tmp_path / "o")


def test_ga_paths_may_lie_in_the_input_folders_not_beside_an_input_file(tmp_path):
    """A folder or a glob given as --input is a root for GA manifest paths; a single file (a
    page, an ar5iv dump) is not: the folder it sits in was never given (the fuzz run's dump in
    the test folder once made a canary beside it readable)."""
    from sciga.pipelines.build import input_roots

    (tmp_path / "in").mkdir()
    dump = tmp_path / "dump.zip"
    dump.write_bytes(b"PK")
    assert input_roots([str(tmp_path / "in"), str(dump)]) == (str(tmp_path / "in"),)
    assert input_roots([f"{tmp_path}/in/*.html"]) == (f"{tmp_path}/in",)
    assert input_roots(["gs://b/pages", "gs://b/dumps/d.tar"]) == ("gs://b/pages",)
