"""The checked-in gRPC stubs are what `make protos` makes from protos/*.proto."""

from __future__ import annotations

import pytest

from semcodec.protos import generate


def test_checked_in_stubs_match_the_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools (a dev dependency) regenerates them")
    written = generate.generate(tmp_path)
    assert written, "no .proto file in protos/"
    for path in written:
        checked_in = generate.PROTO_DIR / path.name
        assert checked_in.is_file(), f"{path.name} is not checked in: run `make protos`"
        assert checked_in.read_text() == path.read_text(), (
            f"protos/{path.name} is stale: run `make protos` and commit the result")


def test_stubs_import_each_other_inside_the_package():
    from semcodec.protos import semcodec_v1_pb2 as pb
    from semcodec.protos import semcodec_v1_pb2_grpc as pb_grpc

    text = (generate.PROTO_DIR / "semcodec_v1_pb2_grpc.py").read_text()
    assert "from semcodec.protos import semcodec_v1_pb2" in text
    assert pb.DESCRIPTOR.package == "semcodec.v1"
    assert hasattr(pb_grpc, "SemanticStreamStub")
