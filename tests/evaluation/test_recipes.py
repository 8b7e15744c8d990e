"""Tests of evaluation.data.recipes: the shipped recipes load, and verification finds problems."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from semcodec.evaluation.data.recipes import (
    RECIPE_KINDS,
    RecipeError,
    folder_digest,
    load_recipes,
    verify_recipe,
)

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SHARED_SEQUENCES = ("PETS09-S2L1", "PETS09-S2L1-full", "TUD-Stadtmitte", "CiscoVT2people_320x192")
PUBLIC = ("MOT15", "MOT16", "MOT17", "foreman", "hall_monitor", "BasketballPass", "UVG")

MINIMAL = """
name = "{name}"
title = "t"
kind = "sequence"
summary = "s"
official_url = "unknown"
licence = "l"
citation = "c"
storage = "st"
ground_truth = "none"
frame_rate = 25
width = 4
height = 2
frame_count = 1
"""


def write_recipe(folder: Path, body: str, name: str = "tiny") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(MINIMAL.format(name=name) + body)
    return path


def test_shipped_recipes_load_with_required_fields() -> None:
    recipes = load_recipes()
    for name in (*SHARED_SEQUENCES, *PUBLIC, "Wildtrack", "EPFL-MVMC"):
        assert name in recipes, f"recipe {name} missing"
    for recipe in recipes.values():
        assert recipe.kind in RECIPE_KINDS
        assert recipe.title and recipe.summary and recipe.licence and recipe.storage
        assert recipe.official_url == "unknown" or "://" in recipe.official_url
        for key in ("frame_rate", "width", "height", "frame_count"):
            assert getattr(recipe, key) is not None or key in recipe.notes
        assert recipe.title in recipe.summary_line("not here")


def test_shared_recipes_have_checksums_and_public_ones_do_not() -> None:
    recipes = load_recipes()
    for name in SHARED_SEQUENCES:
        assert recipes[name].local is not None and recipes[name].has_checksums
    for name in PUBLIC:
        assert recipes[name].local is None and not recipes[name].has_checksums
        assert "checksums" in recipes[name].notes
        assert verify_recipe(recipes[name], "/nonexistent") == []


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} not found")
@pytest.mark.parametrize("name", SHARED_SEQUENCES)
def test_shared_recipes_verify_clean(name: str) -> None:
    assert verify_recipe(load_recipes()[name], SHARED_DATA) == []


def test_verify_reports_missing_and_mismatch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "seq").mkdir(parents=True)
    (data / "seq" / "a.bin").write_bytes(b"abc")
    good = hashlib.sha256(b"abc").hexdigest()
    body = f"""
local = "seq"
[[files]]
path = "seq/a.bin"
sha256 = "{good}"
[[files]]
path = "seq/missing.bin"
sha256 = ""
"""
    recipe = load_recipes(write_recipe(tmp_path / "recipes", body).parent)
    problems = verify_recipe(recipe["tiny"], data)
    assert len(problems) == 1 and "missing.bin" in problems[0]
    (data / "seq" / "a.bin").write_bytes(b"abd")
    problems = verify_recipe(recipe["tiny"], data)
    assert any("sha256 mismatch" in p for p in problems)
    assert any("missing" in p for p in verify_recipe(recipe["tiny"], tmp_path / "elsewhere"))


def test_folder_digest_matches_sha256sums_lines(tmp_path: Path) -> None:
    folder = tmp_path / "seq" / "img1"
    folder.mkdir(parents=True)
    lines = []
    for k in (2, 1, 3):
        payload = f"frame {k}".encode()
        (folder / f"{k:06d}.jpg").write_bytes(payload)
        lines.append(f"{hashlib.sha256(payload).hexdigest()}  ./seq/img1/{k:06d}.jpg\n")
    expected = hashlib.sha256("".join(sorted(lines, key=lambda s: s[66:])).encode()).hexdigest()
    assert folder_digest(tmp_path, "seq/img1", "*.jpg") == (3, expected)
    body = f"""
[[folder_digests]]
folder = "seq/img1"
pattern = "*.jpg"
count = 3
sha256 = "{expected}"
"""
    recipe = load_recipes(write_recipe(tmp_path / "recipes", body).parent)["tiny"]
    assert verify_recipe(recipe, tmp_path) == []
    (folder / "000004.jpg").write_bytes(b"extra")
    assert "has 4 files" in verify_recipe(recipe, tmp_path)[0]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ('[[files]]\npath = "a"\nsha256 = "xyz"\n', "64 lowercase hex"),
        ('[[files]]\npath = "../a"\nsha256 = ""\n', "relative"),
        ('local = "/abs"\n', "relative"),
    ],
)
def test_malformed_recipes_raise(tmp_path: Path, body: str, match: str) -> None:
    write_recipe(tmp_path, body)
    with pytest.raises(RecipeError, match=match):
        load_recipes(tmp_path)


def test_absent_number_needs_a_note(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(MINIMAL.format(name="x").replace("frame_rate = 25\n", ""))
    with pytest.raises(RecipeError, match="frame_rate"):
        load_recipes(tmp_path)
    (tmp_path / "x.toml").write_text(
        MINIMAL.format(name="x").replace("frame_rate = 25\n", "")
        + '[notes]\nframe_rate = "unknown"\n'
    )
    assert load_recipes(tmp_path)["x"].frame_rate is None


def test_duplicate_names_and_missing_fields_raise(tmp_path: Path) -> None:
    write_recipe(tmp_path, "", name="a")
    (tmp_path / "b.toml").write_text(MINIMAL.format(name="a"))
    with pytest.raises(RecipeError, match="already used"):
        load_recipes(tmp_path)
    (tmp_path / "b.toml").write_text(MINIMAL.format(name="b").replace('licence = "l"\n', ""))
    with pytest.raises(RecipeError, match="licence"):
        load_recipes(tmp_path)
    with pytest.raises(RecipeError, match="not found"):
        load_recipes(tmp_path / "nowhere")
