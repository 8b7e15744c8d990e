"""BD-rate, plots and the Markdown report from result rows."""

from __future__ import annotations

import pytest

from semcodec.evaluation.report.markdown import bd_rates, curves, write_report


def _rows(curve: str, codec: str, rate_factor: float, psnr_offset: float = 0.0) -> list[dict]:
    rates = [0.01, 0.02, 0.04, 0.08, 0.16]
    return [
        {
            "sequence": "seq",
            "codec": codec,
            "curve": curve,
            "setting": f"crf={i}",
            "bpp": r * rate_factor,
            "psnr": 30 + 3 * i + psnr_offset,
            "st_lpips": 0.5 - 0.08 * i,
            "dec_fps": 100.0,
        }
        for i, r in enumerate(rates)
    ]


def test_bd_rate_of_a_curve_at_half_the_rate_is_minus_fifty_percent():
    rows = _rows("x265", "x265", 1.0) + _rows("x264", "x264", 0.5)
    result = {(r["curve"], r["metric"]): r["bd_rate_percent"] for r in bd_rates(rows)}
    assert result[("x264", "psnr")] == pytest.approx(-50.0, abs=1e-6)
    # lower-is-better metrics are negated, so the sign means the same thing
    assert result[("x264", "st_lpips")] == pytest.approx(-50.0, abs=1e-6)


def test_bd_rate_doubles_rate_gives_plus_hundred_percent():
    rows = _rows("x265", "x265", 1.0) + _rows("jpeg", "jpeg", 2.0)
    (row,) = [r for r in bd_rates(rows, metrics=("psnr",))]
    assert row["bd_rate_percent"] == pytest.approx(100.0, abs=1e-6)


def test_raw_rows_and_missing_values_are_not_curve_points():
    rows = _rows("x265", "x265", 1.0) + [
        {"sequence": "seq", "codec": "raw", "curve": "raw", "bpp": 24.0, "psnr": 100.0},
        {"sequence": "seq", "codec": "x264", "curve": "x264", "bpp": 0.1, "psnr": ""},
    ]
    table = curves(rows, "psnr")
    assert list(table) == [("seq", "x265")]
    assert len(table[("seq", "x265")]) == 5


def test_report_writes_plots_and_markdown(tmp_path):
    rows = _rows("x265", "x265", 1.0) + _rows("x264", "x264", 0.7)
    path = write_report(rows, tmp_path, command="semcodec-bench run")
    text = path.read_text()
    assert "| sequence | codec | setting | bpp |" in text
    assert "BD-rate against x265" in text
    for name in (
        "rate_psnr.png",
        "rate_st_lpips.png",
        "rate_compute_quality.png",
        "bd_rate.csv",
        "bd_rate.json",
    ):
        assert (tmp_path / name).stat().st_size > 0


def _curve(curve: str, psnrs: list[float], rates: list[float]) -> list[dict]:
    return [{"sequence": "seq", "codec": curve, "curve": curve, "setting": f"crf={i}", "bpp": r,
             "psnr": p} for i, (p, r) in enumerate(zip(psnrs, rates, strict=True))]  # fmt: skip


def test_bd_rate_is_refused_where_the_curves_overlap_too_little():
    anchor = _curve("x265", [30, 33, 36, 39], [0.01, 0.02, 0.04, 0.08])
    # quality range 37..45 against 30..39: the overlap 37..39 is 2 / 15 = 13.3 % of the span
    short = _curve("x264", [37, 40, 43, 45], [0.1, 0.2, 0.4, 0.8])
    (row,) = bd_rates(anchor + short, metrics=("psnr",))
    assert row["bd_rate_percent"] is None
    assert "13.3 %" in row["note"] and "75 %" in row["note"]
    # 31..39.5 against 30..39: overlap 8 / 9.5 = 84 %, above the package's 75 %: a value
    enough = _curve("x264", [31, 34, 37, 39.5], [0.011, 0.022, 0.044, 0.09])
    (row,) = bd_rates(anchor + enough, metrics=("psnr",))
    assert row["bd_rate_percent"] is not None and row["note"] == ""
    apart = _curve("x264", [50, 51, 52, 53], [1, 2, 3, 4])
    (row,) = bd_rates(anchor + apart, metrics=("psnr",))
    assert row["bd_rate_percent"] is None and "do not overlap" in row["note"]
    bumpy = _curve("x264", [31, 35, 34, 39], [0.011, 0.022, 0.044, 0.09])  # 35 then 34
    (row,) = bd_rates(anchor + bumpy, metrics=("psnr",))
    assert row["bd_rate_percent"] is None and "does not rise strictly" in row["note"]


def test_report_states_the_data_detector_and_sampling(tmp_path):
    detector = '{"score_threshold": 0.5, "tiles": 2, "include_full_frame": true}'
    rows = [{**r, "frames": 60, "width": 384, "height": 288, "fps": 7.0, "detector": detector,
             "st_lpips_frames": 15, "moda_frames": 30}
            for r in _rows("x265", "x265", 1.0)]  # fmt: skip
    rows.append({**rows[0], "codec": "raw", "curve": "raw", "setting": "format=rgb24",
                 "bpp": 24.0, "enc_fps": 1000.0, "dec_fps": 4000.0})  # fmt: skip
    (tmp_path / "detector").mkdir()
    (tmp_path / "detector" / "seq-60f-every2.json").write_text("{}")
    text = write_report(rows, tmp_path).read_text()
    assert "frames 1–60 (60 frames), 384x288 pixels, 7 fps" in text
    assert "score threshold 0.5, 2x2 tiles plus the whole frame (chosen by best MODA" in text
    assert (
        "ST-LPIPS on every 4th frame (15 of 60); MODA on every 2nd frame (30 of 60); the "
        "other metrics on every frame"
    ) in text
    raw_line = next(line for line in text.splitlines() if "| raw |" in line)
    assert "1000" not in raw_line and "4000" not in raw_line  # no speeds for raw


def test_plots_tell_codecs_and_settings_apart(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from semcodec.evaluation.report.markdown import plot_rate_compute_quality, plot_rate_quality

    figures = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    rows = _rows("x265", "x265", 1.0) + _rows("x264", "x264", 0.7)
    assert plot_rate_quality(rows, "psnr", tmp_path / "a.png")
    assert plot_rate_compute_quality(rows, tmp_path / "b.png")
    rq, rcq = (fig.axes[0] for fig in figures)
    assert len({line.get_marker() for line in rq.get_lines()}) == 2  # a marker per codec
    assert {t.get_text() for t in rq.texts} >= {"crf=0", "crf=4"}  # settings beside points
    assert "seq" in rcq.get_title()
    legend = rcq.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["x264", "x265"]
    markers = {h.get_marker() for h in legend.legend_handles}
    assert len(markers) == 2  # the legend is about markers; colour is the colour bar's
    assert all(h.get_color() == "0.6" for h in legend.legend_handles)


def test_result_sets_and_readme_blocks_regenerate(tmp_path):
    """figures: a run's rows become NAME.json/NAME.md; a README block is replaced by NAME.md
    and a block without a result set is an error."""
    import json

    from semcodec.evaluation.report.figures import (
        FiguresError,
        splice_readme,
        write_result_set,
    )

    run = tmp_path / "run"
    run.mkdir()
    base = {"sequence": "S", "start": 1, "frames": 10, "protocol": "cold", "width": 8,
            "height": 8}  # fmt: skip
    rows = [{**base, "codec": "x265", "setting": f"crf={c}", "curve": "x265", "bpp": b,
             "st_lpips": q} for c, b, q in ((40, 0.02, 0.1), (51, 0.005, 0.3))]  # fmt: skip
    rows.append({**base, "codec": "scaffold", "setting": "level=1", "bpp": 0.004, "st_lpips": 0.2})
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "report.md").write_text("Machine: m. Rows: 3. Command: `semcodec-bench run --out run`\n")
    json_path, md_path = write_result_set("demo-set", [run], tmp_path / "results")
    data = json.loads(json_path.read_text())
    assert data["commands"] == ["semcodec-bench run --out run"] and len(data["rows"]) == 3
    (saving,) = data["savings"]
    assert saving["metric"] == "st_lpips" and saving["factor"] > 1  # 0.2 needs more than 0.004
    table = md_path.read_text()
    assert "**S**, frames 1–10, cold start" in table and "saving: st_lpips" in table
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- figures:demo-set -->\nSTALE\n<!-- /figures:demo-set -->\nb\n")
    assert splice_readme(readme, tmp_path / "results")
    assert table in readme.read_text() and "STALE" not in readme.read_text()
    assert not splice_readme(readme, tmp_path / "results")  # current: unchanged
    readme.write_text("<!-- figures:nope -->\n<!-- /figures:nope -->\n")
    with pytest.raises(FiguresError, match="nope.md does not exist"):
        splice_readme(readme, tmp_path / "results")


def test_the_headline_is_level_1_against_x265_per_camera_and_protocol(tmp_path):
    """headline.md: one line per headline result set's level-1 row, with its saving factors
    against x265 (bounds kept); other rows and sets outside HEADLINE_SETS are left out."""
    import json

    from semcodec.evaluation.report.figures import splice_readme, write_result_set

    run = tmp_path / "run"
    run.mkdir()
    base = {"sequence": "TUD", "start": 91, "frames": 89, "protocol": "steady", "width": 8,
            "height": 8}  # fmt: skip
    rows = [{**base, "codec": "x265", "setting": f"crf={c}", "curve": "x265", "bpp": b,
             "st_lpips": q, "moda": m} for c, b, q, m in ((40, 0.02, 0.1, 0.6),
                                                         (51, 0.005, 0.3, 0.2))]  # fmt: skip
    rows += [{**base, "codec": "scaffold", "setting": s, "bpp": 0.004, "st_lpips": 0.2,
              "moda": 0.7} for s in ("level=1", "level=2")]  # fmt: skip
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    results = tmp_path / "results"
    write_result_set("level1-steady-tud", [run], results)
    write_result_set("not-in-the-headline", [run], results)
    page = tmp_path / "README.md"
    page.write_text("<!-- figures:headline -->\n<!-- /figures:headline -->\n")
    assert splice_readme(page, results)
    lines = [line for line in page.read_text().splitlines() if line.startswith("| TUD")]
    # ST-LPIPS 0.2 lies halfway in log-BPP between x265's 0.02 and 0.005 (0.01 BPP: 2.5x);
    # MODA 0.7 is above x265's best (at most 0.02 / 0.004 BPP)
    assert lines == ["| TUD | 91–179 | steady state | 0.004 | 2.50x |  | >= 5.00x |"]


def test_a_result_set_shows_the_decoders_flops_where_a_row_has_them(tmp_path):
    """Bits x FLOPs (issue 39): ``dec_flops_per_frame`` is a column of the README's table
    when a row of the range has it, and absent from a range where none has."""
    import json

    from semcodec.evaluation.report.figures import write_result_set

    base = {"start": 1, "frames": 10, "protocol": "cold", "width": 8, "height": 8,
            "codec": "scaffold", "bpp": 0.004}  # fmt: skip
    rows = [{**base, "sequence": "A", "setting": "level=1"},
            {**base, "sequence": "A", "setting": "level=1,decoder=restore",
             "dec_flops_per_frame": 492994334.0},
            {**base, "sequence": "B", "setting": "level=1"}]  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    json_path, md_path = write_result_set("flops", [run], tmp_path / "r")
    first, second = md_path.read_text().split("**B**")
    assert "dec_flops_per_frame" in first and "dec_flops_per_frame" not in second
    kept = json.loads(json_path.read_text())["rows"]
    assert [r.get("dec_flops_per_frame") for r in kept] == [None, 492994334.0, None]


def test_a_result_set_against_a_row_tells_the_bits_each_curve_needs(tmp_path):
    """``figures --against scaffold:level=1``: the set's JSON and tables say how many times
    fewer bits each level-1 curve needs for that row's quality; a set without it is refused."""
    import json

    from semcodec.evaluation.report.figures import FiguresError, write_result_set

    base = {"sequence": "S", "start": 1, "frames": 10, "protocol": "steady", "width": 8,
            "height": 8, "codec": "scaffold"}  # fmt: skip
    rows = [{**base, "setting": "level=1", "bpp": 0.004, "person_st_lpips": 0.26},
            {**base, "setting": "level=1,target_bpp=0.001,decoder=restore", "bpp": 0.001,
             "person_st_lpips": 0.30},
            {**base, "setting": "level=1,target_bpp=0.002,decoder=restore", "bpp": 0.002,
             "person_st_lpips": 0.22}]  # fmt: skip
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    json_path, md_path = write_result_set("reach", [run], tmp_path / "r", "scaffold:level=1")
    data = json.loads(json_path.read_text())
    assert data["against"] == "scaffold:level=1"
    (reach,) = [r for r in data["reach"] if r["family"] == "level=1,decoder=restore"]
    assert reach["factor"] == pytest.approx(2 ** 1.5) and reach["bound"] == "="
    table = md_path.read_text()
    assert "Fewer bits than `scaffold:level=1` (0.004 BPP)" in table
    assert "| scaffold | level=1,decoder=restore | 2.83x (0.001414) |" in table
    assert "Fewer bits than" not in write_result_set("plain", [run], tmp_path / "r")[1].read_text()
    with pytest.raises(FiguresError, match="no row of the runs has that codec and setting"):
        write_result_set("none", [run], tmp_path / "r", "scaffold:level=2")


def test_a_result_set_names_every_command_that_filled_its_folder(tmp_path):
    """Two invocations into one folder (the x265 rows, then level 1's): the result set lists
    both commands, each once, in order; the report's single command is the fallback."""
    import json

    from semcodec.evaluation.report.figures import record_command, write_result_set

    run = tmp_path / "run"
    run.mkdir()
    row = {"sequence": "S", "start": 1, "frames": 10, "protocol": "cold", "width": 8,
           "height": 8, "codec": "scaffold", "setting": "level=1", "bpp": 0.004}  # fmt: skip
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    (run / "report.md").write_text("Command: `semcodec-bench run --codecs scaffold`\n")
    old = json.loads(write_result_set("one", [run], tmp_path / "r")[0].read_text())
    assert old["commands"] == ["semcodec-bench run --codecs scaffold"]
    for command in ("semcodec-bench run --codecs x265", "semcodec-bench run --codecs scaffold",
                    "semcodec-bench run --codecs x265"):  # a resumed run is not listed twice
        record_command(run, command)
    data = json.loads(write_result_set("two", [run], tmp_path / "r")[0].read_text())
    assert data["commands"] == ["semcodec-bench run --codecs x265",
                                "semcodec-bench run --codecs scaffold"]  # fmt: skip


def test_every_column_a_report_shows_is_defined_once():
    from semcodec.evaluation.bench.grid import BASE_COLUMNS
    from semcodec.evaluation.report.columns import DEFINITIONS, definitions_for
    from semcodec.evaluation.report.markdown import RESULT_COLUMNS

    defined = [c for d in DEFINITIONS for c in d.columns if c != "saving"]
    assert len(defined) == len(set(defined))
    assert set(RESULT_COLUMNS) - {"sequence", "codec", "setting"} <= set(defined)
    assert set(defined) - {"st_lpips_frames", "person_crops"} <= set(BASE_COLUMNS)
    bullets = definitions_for(["bpp", "twe", "person_recall"])
    assert [b.split(":")[0] for b in bullets] == [
        "- `bytes`, `bpp`", "- `person_recall`, `scaffold_people`", "- `flicker`, `twe`"]


def test_the_report_defines_the_columns_it_shows(tmp_path):
    rows = _rows("x265", "x265", 1.0)
    write_report(rows, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "- `bytes`, `bpp`: payload bytes" in report
    assert "- `twe`" not in report and "- `flicker`, `twe`" not in report


def test_saving_csv_keeps_a_setting_with_commas_in_one_field(tmp_path):
    import csv

    rows = _rows("x265", "x265", 1.0)
    rows.append({"sequence": "seq", "codec": "scaffold", "curve": "scaffold",
                 "setting": "level=1,decoder=restore", "bpp": 0.015, "psnr": 33.0,
                 "st_lpips": 0.3, "dec_fps": 5.0})  # fmt: skip
    write_report(rows, tmp_path)
    with open(tmp_path / "saving.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert table and all(None not in row for row in table)  # no field spilled over
    (scaffold,) = {r["setting"] for r in table if r["codec"] == "scaffold"}
    assert scaffold == "level=1,decoder=restore"
    assert {float(r["bpp"]) for r in table if r["codec"] == "scaffold"} == {0.015}


def test_bd_rate_csv_keeps_a_curve_with_commas_in_one_field(tmp_path):
    """A curve named by a setting with commas (two points, so it has a BD-rate against
    x265) reads back from ``bd_rate.csv`` as one field, with the JSON's value."""
    import csv
    import json

    rows = _rows("x265", "x265", 1.0) + _rows("scaffold@level=1,sr=slim", "scaffold", 0.5)
    write_report(rows, tmp_path)
    with open(tmp_path / "bd_rate.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert table and all(None not in row for row in table)  # no field spilled over
    wanted = [r for r in json.loads((tmp_path / "bd_rate.json").read_text())
              if r["curve"] == "scaffold@level=1,sr=slim"]  # fmt: skip
    got = [r for r in table if r["curve"] == "scaffold@level=1,sr=slim"]
    assert wanted and len(got) == len(wanted)
    assert {(r["anchor"], r["metric"]) for r in got} == {(r["anchor"], r["metric"])
                                                         for r in wanted}  # fmt: skip
