"""The model registry: resolution order, checksums, clear errors."""

from __future__ import annotations

import hashlib

import pytest
from semcodec.codec import models
from semcodec.codec.models import (
    ModelChecksumError,
    ModelNotFoundError,
    ModelSpec,
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
    for name in ("ssdlite_person", "stlpips_alex"):
        try:
            path = resolve_model(name)
        except ModelNotFoundError:
            pytest.skip("../shared/models is not beside the repository")
        assert path.is_file()
