"""The entropy layer is the same on every machine (issue 52): every table the scaffold coders
use, and a fixed symbol sequence coded with each by compressai's rANS, against known answers
(x86_64's; `make arm64-check` compares them with aarch64's under emulation), and a build of
compressai's extension with C++ assertions, which aborts the process on semcodec's tables, is
refused with a message instead."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from semcodec.codec.entropy import rans

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "arm64" / "tables.py"

# name, CdfTable.sha256, sha256 of the payload, its bytes (python tools/arm64/tables.py)
EXPECTED = """
boxes.res 14c0db076f89b029 e0bd49e61ea4e900 3452
boxes.pos 0e7edc1f0fba2623 4f5da50021b042d6 3080
boxes.size d19f2ebfe059b8f2 d51c648601903b71 3136
boxes.flag b5d5f799b303a500 e47f74890e156769 540
boxes.count ae05668a4ba31205 60c17a29b352ce50 1124
boxes.gap 11b9dae8a20567dd f0c1b7bbedb6291a 2212
boxes.scale bf6504479649ac92 99d63381e3bab47b 1116
pose.res 5e5f767b25675b9d 815aaa73a1134d90 3652
pose.anchor 7409cdbdeb2565b5 ba11998826b8db70 3088
pose.flag b5d5f799b303a500 e47f74890e156769 540
pose.count ae05668a4ba31205 60c17a29b352ce50 1124
pose.gap 11b9dae8a20567dd f0c1b7bbedb6291a 2212
pose.scale 3dcb9c64e45c025b f70904473ce85ee4 1260
pose.vis bc0ac302a7ee9b60 0aca5f3abbc6884e 952
pose.score bf6504479649ac92 99d63381e3bab47b 1116
sparse_pose.flag 0cb2b81c1687403b ce2da99d5e394be1 436
sparse_pose.scale bf6504479649ac92 99d63381e3bab47b 1116
sparse_pose.res 06bc0f6cb99ef1ae 877cf0e1ee7197ac 3008
sparse_pose.vis 0e8f4ae0bc1080c2 d359cd43ca63c051 484
segmentation.count ae05668a4ba31205 60c17a29b352ce50 1124
segmentation.gap 11b9dae8a20567dd f0c1b7bbedb6291a 2212
segmentation.changed 6ee24adde59bfe76 2ff98be072eca748 560
segmentation.cand 3f832c79ec0102ce 8406db914e2b0b29 1208
segmentation.shift b694b54567f5b9d0 a7780a0f52986eec 2024
segmentation.flag 352016b43b231078 b333e0eac877de86 1012
flow.learned.1.0 d7942973adf87084 1ef4608474e2e6be 2588
flow.default.1.0 d391edb210614896 4b78759099eaa80a 3956
flow.learned.0.5 fb1a479aa64ebdea 03284bc26fb6f4d5 3048
flow.default.0.5 48030f88b694e695 c8b6f2da21f2edcf 3876
flow.learned.0.25 64e5952ac2a19340 3231719f2f699769 3168
flow.default.0.25 1a9207d7a5e718fc 2d7541424dfcd83b 3748
rans.nbits 1146344f92f0bbdf 4aea49612469b3bc 1304
rans.chunks 23a2fcb0aeebf529 d4c1c784e0dddea5 1252
rans.laplace 3cc3191f5c0c5cb8 c2eb81ca05c5540c 3092
rans.pmf 1a55b68fba99f9fc 0d7154ad481ea3cd 2000
"""


def _tables_tool():
    spec = importlib.util.spec_from_file_location("arm64_tables", TOOLS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_table_and_payload_is_the_known_answer():
    got = _tables_tool().digest_lines()
    want = EXPECTED.split("\n")[1:-1]
    assert len(got) == len(want) == 35
    assert [line for line in got if line not in want] == []
    assert got == want


def test_the_installed_rans_extension_has_no_assertions():
    path = Path(rans._ans().__file__)
    assert path.is_file()
    assert rans._ASSERTING_BUILD not in path.read_bytes()
    rans._check_release_build(path)  # does not raise


def test_an_extension_built_with_assertions_is_refused(tmp_path):
    asserting = tmp_path / "ans.so"
    asserting.write_bytes(b"\x7fELF..." + rans._ASSERTING_BUILD + b"\x00...")
    with pytest.raises(RuntimeError, match="-DNDEBUG"):
        rans._check_release_build(asserting)
    release = tmp_path / "release.so"
    release.write_bytes(b"\x7fELF...assert_cdfs\x00...")
    rans._check_release_build(release)
    rans._check_release_build(tmp_path / "missing.so")
    rans._check_release_build(None)


def test_the_unreachable_slot_is_what_an_asserting_build_would_reject():
    # why assertions matter: every CDF handed to compressai ends past 2**16 (its bypass can
    # then never be entered), which compressai's assert_cdfs forbids
    cdfs, lengths, _ = rans.uniform_table(3)._native
    assert cdfs[0][-1] == (1 << rans.PRECISION) + 1 and lengths[0] == len(cdfs[0])
