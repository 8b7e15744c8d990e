"""The serve settings are declared once (issue 50, part 5): every :class:`ServeSettings` field
that has a flag is in ``cloud-decoder serve --help`` with its help and its default, no flag
exists without a field, the switches and the flagless settings behave as declared, and the
session core's limits are derived from the same fields."""

from __future__ import annotations

import argparse
import dataclasses
import os

import pytest

from semcodec.cloud.service.config import (
    ServeSettings,
    add_serve_arguments,
    load_settings,
    serve_overrides,
)
from semcodec.cloud.service.limits import ServiceLimits

FIELDS = {f.name: f for f in dataclasses.fields(ServeSettings)}
FLAGGED = [name for name, f in FIELDS.items() if f.metadata["flag"]]
#: Options of ``serve`` that set no setting: help, verbosity and the config file.
NOT_SETTINGS = {"-h", "--help", "-v", "--verbose", "-q", "--quiet", "--config"}
#: The settings only the config file and the environment set.
FLAGLESS = {"keepalive_timeout_s", "max_connection_age_grace_s"}


def _flag(name: str) -> str:
    """The flag the declaration promises: ``--no-NAME`` for a boolean on by default."""
    negated = FIELDS[name].default is True
    return ("--no-" if negated else "--") + name.replace("_", "-")


def _default_text(value) -> str:
    """How the help shows a default, formatted here independently of the generator."""
    if value is dataclasses.MISSING:
        return "(required)"
    if value is None or value == "":
        return "(default: none)" if value is None else "(default: '')"
    return f"(default: {value:g})" if isinstance(value, float) else f"(default: {value})"


def _options(help_text: str) -> dict[str, str]:
    """Each option's help (whitespace normalised), under each of its flags."""
    options: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in help_text.splitlines():
        if line.startswith("  -"):
            invocation, _, rest = line.strip().partition("  ")
            current = [rest]
            for flag in invocation.split(", "):
                options[flag.split()[0]] = current
        elif line.startswith("    ") and current is not None:
            current.append(line)
        else:
            current = None
    return {flag: " ".join(" ".join(parts).split()) for flag, parts in options.items()}


def _generated_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cloud-decoder serve")
    add_serve_arguments(parser)
    return parser


def _generated_help() -> str:
    return _generated_parser().format_help()


def _cli_help(capsys) -> str:
    from semcodec.cloud.cli import main

    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("source", ["generator", "cli"])
def test_the_serve_help_is_the_settings_declaration(source, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    options = _options(_generated_help() if source == "generator" else _cli_help(capsys))
    assert set(options) - NOT_SETTINGS == {_flag(name) for name in FLAGGED}
    for name in FLAGGED:
        shown = options[_flag(name)]
        assert " ".join(FIELDS[name].metadata["help"].split()) in shown, name
        if FIELDS[name].type != "bool":
            assert shown.endswith(_default_text(FIELDS[name].default)), (name, shown)


def test_the_serve_help_says_what_is_needed_beyond_the_loopback(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    shown = "".join(_cli_help(capsys).split())  # argparse may wrap a flag at its hyphens
    assert "Beyondtheloopback" in shown
    for flag in ("--tokensFILE", "--tls-cert", "--allow-anonymous-remote", "--metrics-listen",
                 "--trusted-proxies", "--http-max-connections-per-peer"):  # fmt: skip
        assert flag in shown.partition("Beyondtheloopback")[2], flag


def test_flags_switches_and_the_environment_merge_into_the_settings(tmp_path):
    parser = _generated_parser()
    args = parser.parse_args(["--out", str(tmp_path), "--no-overview", "--max-sessions", "3",
                              "--allow-anonymous-remote", "--retain-s", "60",
                              "--metrics-listen", ""])  # fmt: skip
    given = {name: value for name, value in serve_overrides(args).items() if value is not None}
    assert given == {"out": tmp_path, "overview": False, "max_sessions": 3,
                     "allow_anonymous_remote": True, "retain_s": 60.0,
                     "metrics_listen": ""}  # fmt: skip
    environ = {"SEMCODEC_SERVE_MAX_SESSIONS": "5", "SEMCODEC_SERVE_MAX_VIEWERS": "7"}
    settings = load_settings(serve_overrides(args), args.config, environ)
    assert settings == ServeSettings(out=tmp_path, overview=False, max_sessions=3,
                                     allow_anonymous_remote=True, retain_s=60.0,
                                     metrics_listen="", max_viewers=7)  # fmt: skip
    bare = parser.parse_args([])
    assert set(serve_overrides(bare).values()) == {None}  # nothing given overrides nothing
    environ = {"SEMCODEC_SERVE_OUT": str(tmp_path)}
    assert load_settings(serve_overrides(bare), None, environ) == ServeSettings(out=tmp_path)


def test_flagless_settings_have_no_flag_and_are_set_by_file_or_environment(tmp_path, capsys):
    assert set(FIELDS) - set(FLAGGED) == FLAGLESS
    parser = _generated_parser()
    for name in FLAGLESS:
        with pytest.raises(SystemExit):
            parser.parse_args([_flag(name), "5"])
    assert "unrecognized arguments" in capsys.readouterr().err
    config = tmp_path / "serve.toml"
    config.write_text("[serve]\nmax_connection_age_grace_s = 4\n")
    environ = {"SEMCODEC_SERVE_OUT": str(tmp_path), "SEMCODEC_SERVE_KEEPALIVE_TIMEOUT_S": "5"}
    settings = load_settings({}, config, environ)
    assert (settings.keepalive_timeout_s, settings.max_connection_age_grace_s) == (5.0, 4.0)


def test_the_core_limits_are_derived_from_the_settings(tmp_path):
    settings = ServeSettings(out=tmp_path, max_sessions=5, max_backlog_units=6, max_chunk_kib=8,
                             max_unit_mib=2, max_session_kbps=80.0, session_burst_kib=4,
                             tenant_max_sessions=3, tenant_max_streams=4, tenant_max_kbps=16.0,
                             tenant_max_stored_mib=1.5, tenant_max_decoder_gflops=2.5,
                             tenant_max_stored_sessions=11, tenant_max_output_mib=0.5,
                             session_idle_s=9.0, retain_s=99.0, decode_threads=3)  # fmt: skip
    limits = ServiceLimits.of(settings, max_markers=7)
    assert dataclasses.asdict(limits) == {
        "max_sessions": 5, "max_backlog_units": 6, "max_chunk_bytes": 8192,
        "max_unit_bytes": 2 << 20, "max_session_bytes_per_s": 10_000.0,
        "session_burst_bytes": 4096, "tenant_max_sessions": 3, "tenant_max_streams": 4,
        "tenant_bytes_per_s": 2000.0, "tenant_max_stored_bytes": 3 << 19,
        "tenant_max_decoder_flops": 2.5e9, "tenant_max_stored_sessions": 11,
        "tenant_max_output_bytes": 1 << 19, "session_idle_s": 9.0, "retain_s": 99.0,
        "decode_threads": 3, "backlog_wait_s": 120.0, "close_timeout_s": 120.0,
        "max_markers": 7, "compute_window_s": 5.0}  # fmt: skip
    # the setting's 0 is the machine's cores; the core's 0 would mean no bound
    cores = ServiceLimits.of(ServeSettings(out=tmp_path)).decode_threads
    assert cores == (os.cpu_count() or 2)
    # only the core's own limits have defaults of their own: the rest come from the settings
    own = {f.name for f in dataclasses.fields(ServiceLimits)
           if f.default is not dataclasses.MISSING}  # fmt: skip
    assert own == {"backlog_wait_s", "close_timeout_s", "max_markers", "compute_window_s"}
