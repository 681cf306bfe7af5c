"""The tracker options of ``track``, ``demo`` and ``eval``: one route from the flags and the
``--option`` items to a tracker's options (:func:`tracker_options`), checked by the registry
(:func:`ebmtrack.tracking.registry.check_options`) so that errors name the flag, not the
Python argument behind it.

What each flag applies to follows the registry's :class:`~ebmtrack.tracking.registry.TrackerKind`
of the tracker: ``--weights`` to the trackers that take box-head weights, ``--backbone``,
``--backbone-weights`` and ``--onnx`` to those with a backbone of ours, ``--peer-models`` to
those that read model files (and to a NanoTrack backbone of ours). A flag that does not apply is
refused, naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ebmtrack.cli.main import CLIError, resolve_device
from ebmtrack.cli.options import add_option, parse_option

PEER_MODELS_HELP = (
    "folder holding the ONNX files of OpenCV's nanotrack and vit trackers "
    "(nanotrack_backbone_sim.onnx, nanotrack_head_sim.onnx, vitTracker.onnx)"
)


@dataclass(frozen=True)
class Flag:
    """A flag that sets one tracker option.

    Attributes:
        option: the option it sets.
        value: the option's value from the flag's (None: the flag's own).
        shown: how an error names the flag: with its value (``--weights w.safetensors``) or
            alone (``--onnx``).
    """

    option: str
    value: object = None
    shown: bool = True


FLAGS: dict[str, Flag] = {  # the flags of track, demo and eval that set an option
    "--backbone": Flag("backbone"),
    "--weights": Flag("weights"),
    "--backbone-weights": Flag("backbone_weights"),
    "--search-size": Flag("search_size"),
    "--onnx": Flag("backbone_runtime", "onnx", shown=False),
}


def add_peer_models_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peer-models", type=Path, metavar="DIR", help=PEER_MODELS_HELP)


def add_runtime_argument(parser: argparse.ArgumentParser) -> None:
    """``--runtime lite|torch``: the same meaning in every command
    (:mod:`ebmtrack.tracking.runtime`)."""
    parser.add_argument(
        "--runtime",
        choices=("lite", "torch"),
        help="lite: the tracker's export shipped in the package, run by ONNX Runtime without "
        "PyTorch (the default for atom, atom-iounet, atom-polished); torch: the torch tracker "
        "(pip install 'ebmtrack[train]'), which also takes --weights, --backbone, "
        "--backbone-weights, --search-size and --device cuda",
    )


def add_tracker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tracker``, ``--weights``, ``--backbone``, ``--backbone-weights``, ``--peer-models``."""
    from ebmtrack.tracking.registry import tracker_names

    parser.add_argument(
        "--tracker",
        default="atom",
        help=f"registered tracker name (default atom): {', '.join(tracker_names())}",
    )
    parser.add_argument(
        "--weights",
        type=Path,
        metavar="FILE",
        help="box-head weights (.safetensors) of the trackers that take them: an IoU-Net for "
        "the atom trackers, an EBM head for dimp-nce+ (option weights; default: the head "
        "shipped for the tracker and backbone; --runtime torch)",
    )
    parser.add_argument(
        "--backbone",
        help="backbone of the trackers with a backbone of ours (option backbone; default "
        "mobilenetv2; a wrong name lists the registered ones)",
    )
    parser.add_argument(
        "--backbone-weights",
        type=Path,
        metavar="FILE",
        help="the backbone's weights: a checkpoint (.pth or .safetensors) for a backbone that "
        "ships none (the ResNets: torchvision's), or the file a backbone is read from "
        "(nanotrack: nanotrack_backbone_sim.onnx, default: that file in --peer-models); "
        "default: the backbone's shipped ImageNet weights",
    )
    add_peer_models_argument(parser)
    add_runtime_argument(parser)


def peer_models_check(tracker: str, peer_models: Path | None) -> None:
    """A DNN peer tracker without ``--peer-models``: one line naming the flag and the files."""
    from ebmtrack.tracking.opencv import MODEL_FILES

    files = ", ".join(name for name, _ in MODEL_FILES[tracker].values())
    if peer_models is None:
        raise CLIError(f"--tracker {tracker} needs --peer-models DIR, the folder holding {files}")
    if not peer_models.is_dir():
        raise CLIError(f"--peer-models {peer_models}: not a folder")


def device_option(tracker: str, device: str | None) -> str | None:
    """The ``device`` option of ``tracker`` from ``--device`` (None: leave the tracker's own).

    One rule for ``track``, ``demo`` and ``eval``: a tracker that takes a ``device`` option
    (ours) runs where ``--device`` says (``auto``: CUDA when there is a GPU); the others
    (OpenCV's) run on the CPU, so ``--device cuda`` is refused for them and ``cpu`` / ``auto``
    change nothing. ``cuda`` without a GPU is refused by
    :func:`~ebmtrack.cli.main.resolve_device`, with the same message in every command.
    """
    from ebmtrack.tracking.registry import accepted_options

    if device is None:
        return None
    if "device" in accepted_options(tracker):
        return resolve_device(device)
    if device == "cuda":
        raise CLIError(f"--device cuda: tracker {tracker} runs on the CPU only")
    return None  # no GPU to look for: the tracker runs where it always does


def check_tracker_options(name: str, options: dict, origins: dict[str, str]) -> None:
    """The registry's check of ``options`` for tracker ``name``
    (:func:`~ebmtrack.tracking.registry.check_options`), as CLIError naming the flag the wrong
    value came from: ``origins`` maps an option to its flag, e.g. ``{"search_size":
    "--search-size 100"}``; the error says which options it concerns
    (:class:`~ebmtrack.values.OptionError`), the first of them with a flag is named."""
    from ebmtrack.tracking.registry import check_options
    from ebmtrack.values import OptionError

    try:
        check_options(name, options)
    except OptionError as err:
        flag = next((origins[key] for key in err.options if key in origins), None)
        if flag is None:
            raise
        raise CLIError(f"{flag}: {err}") from None


def _backbone_weights(
    backbone: str, origin: str, peer_models: Path | None, hint: str
) -> Path | None:
    """The backbone file to load when no ``backbone_weights`` option is given, or None for the
    shipped ImageNet weights (``origin``: where the backbone was named; ``hint``: how this
    command gives the option)."""
    from ebmtrack.models.backbones import backbone_specs

    spec = backbone_specs().get(backbone)
    if spec is None:
        return None  # the registry refuses it, naming the valid ones
    if spec.weights_file is not None:  # read from its own file: --peer-models may hold it
        if peer_models is not None and (peer_models / spec.weights_file).is_file():
            return peer_models / spec.weights_file
        raise CLIError(
            f"{origin} needs {hint} (its {spec.weights_file}) or --peer-models DIR holding it"
        )
    if spec.weights is None:
        raise CLIError(
            f"{origin} needs {hint}: no ImageNet weights ship for it (e.g. torchvision's "
            f"{backbone}-*.pth, or a .safetensors copy)"
        )
    return None


def _flag_options(name: str, flags: Mapping[str, object], optional: Sequence[str]):
    """The options the flags set, and the flag each came from; a flag of a kind the tracker is
    not is refused (``optional`` flags are left out instead)."""
    from ebmtrack.tracking.registry import kind_refusal

    options, origins = {}, {}
    device = device_option(name, flags.get("--device"))  # first: no GPU is one line anywhere
    if device is not None:
        options["device"], origins["device"] = device, f"--device {flags['--device']}"
    for flag, given in flags.items():
        if flag in ("--device", "--peer-models") or given is None or given is False:
            continue
        spec = FLAGS[flag]
        shown = f"{flag} {given}" if spec.shown else flag
        refusal = kind_refusal(name, spec.option)
        if refusal is not None:
            if flag in optional:
                continue
            raise CLIError(f"{shown}: {refusal}")
        options[spec.option] = spec.value if spec.value is not None else given
        origins[spec.option] = shown
    return options, origins


def tracker_options(
    name: str,
    flags: Mapping[str, object],
    items: Sequence[tuple[str, object, str]] = (),
    *,
    optional: Sequence[str] = (),
    need_files: bool = True,
    hint: Callable[[str], str] | None = None,
    runtime: str | None = None,
) -> dict:
    """The options of tracker ``name`` (registered, canonical) from the command line, the one
    route of ``track``, ``demo`` and ``eval``.

    Args:
        name: the tracker.
        flags: flag -> its value (None or False: not given), e.g. ``{"--weights":
            Path("w.safetensors"), "--device": "auto", "--peer-models": Path("peers")}``; the
            flags of :data:`FLAGS`, ``--device`` (:func:`device_option`) and ``--peer-models``
            (the ``model_dir`` of a tracker that reads model files; a NanoTrack backbone's file).
        items: the ``--option`` items of this tracker: (key, value, the item as typed).
        optional: flags given to every tracker of a command (``eval``'s ``--peer-models``):
            left out where they do not apply instead of refused.
        need_files: check that the files the tracker reads are given (False: options only, for
            a report of results already made).
        hint: how the command gives an option, for the errors (default ``--option KEY=VALUE``).
        runtime: ``--runtime`` (None: the default,
            :func:`ebmtrack.tracking.runtime.resolve_runtime`):
            the torch-free runtime takes its export's options only (:func:`_lite_options`); a
            torch tracker where PyTorch is not installed is one line naming the extra.

    Raises:
        CLIError: a flag that does not apply, an option the tracker does not take or a wrong
            value (naming the flag or item it came from), a file that is missing.
    """
    from ebmtrack.tracking.registry import tracker_kind

    hint = hint or (lambda key: f"--option {key}=VALUE")
    if _runtime(name, runtime) == "lite":
        return _lite_options(name, flags, items, optional)
    kind = tracker_kind(name)
    options, origins = _flag_options(name, flags, optional)
    for key, value, item in items:
        add_option(options, key, value, f"--option {item!r}")
        origins[key] = f"--option {item}"
    check_tracker_options(name, options, origins)
    peer_models = flags.get("--peer-models")
    if kind.model_files:
        from ebmtrack.tracking.opencv import MODEL_FILES

        given = "model_dir" in options or set(options) & set(MODEL_FILES.get(name, ()))
        if peer_models is not None and "model_dir" not in options:
            peer_models_check(name, peer_models)
            options["model_dir"] = peer_models
        elif need_files and not given:
            peer_models_check(name, peer_models)
    elif not kind.backbone and peer_models is not None and "--peer-models" not in optional:
        raise CLIError(f"--peer-models: not used by --tracker {name}")
    for flag in ("--weights", "--backbone-weights"):
        path = flags.get(flag)
        if need_files and path is not None and not Path(path).is_file():
            raise CLIError(f"{flag} {path}: file not found")
    backbone = options.get("backbone", "mobilenetv2")
    if kind.backbone and isinstance(backbone, str) and "backbone_weights" not in options:
        origin = origins.get("backbone", f"backbone {backbone}")
        try:
            found = _backbone_weights(backbone, origin, peer_models, hint("backbone_weights"))
        except CLIError:
            if need_files:
                raise
            found = None
        if found is not None:
            options["backbone_weights"] = found
    return options


def _runtime(name: str, runtime: str | None) -> str:
    """The runtime ``name`` runs (CLIError naming ``--runtime`` where it cannot); a torch tracker
    where PyTorch is not installed: CLIError naming the extra."""
    from ebmtrack.tracking.registry import tracker_kind
    from ebmtrack.tracking.runtime import TRAIN_EXTRA, resolve_runtime, torch_available

    try:
        resolved = resolve_runtime(name, runtime)
    except ValueError as err:
        raise CLIError(f"--runtime {runtime}: {err}") from None
    if resolved == "torch" and tracker_kind(name).backbone and not torch_available():
        how = "--runtime torch" if runtime else f"--tracker {name}"
        raise CLIError(f"{how} needs PyTorch: {TRAIN_EXTRA}")
    return resolved


def _lite_options(name: str, flags: Mapping[str, object], items, optional: Sequence[str]) -> dict:
    """The options of ``name``'s shipped export run by the torch-free runtime: ``--onnx`` and
    the ``--option`` items it takes; the flags only the torch tracker takes (its files, search
    size, ``--device cuda``) are refused naming ``--runtime torch``
    (:func:`ebmtrack.tracking.runtime.check_lite_options`, the message of ``load_tracker``)."""
    from ebmtrack.tracking.runtime import check_lite_options, torch_available
    from ebmtrack.values import OptionError

    options, origins = {}, {}
    use_torch = "only the torch tracker takes it: add --runtime torch"
    if flags.get("--device") == "cuda":
        if torch_available():
            resolve_device("cuda")  # no GPU: the one message of every command
        raise CLIError(f"--device cuda: the torch-free runtime runs on the CPU; {use_torch}")
    for flag, given in flags.items():
        if flag == "--device" or given is None or given is False:
            continue
        if flag == "--peer-models":
            if flag not in optional:
                raise CLIError(f"--peer-models: not used by --tracker {name}")
            continue
        spec = FLAGS[flag]
        shown = f"{flag} {given}" if spec.shown else flag
        value = spec.value if spec.value is not None else given
        options[spec.option], origins[spec.option] = value, shown  # checked below
    for key, value, item in items:
        add_option(options, key, value, f"--option {item!r}")
        origins[key] = f"--option {item}"
    try:
        check_lite_options(name, options)
    except OptionError as err:
        flag = next((origins[key] for key in err.options if key in origins), None)
        raise CLIError(f"{flag}: {err}" if flag else str(err)) from None
    return options


def tracker_settings(args: argparse.Namespace) -> tuple[str, dict]:
    """``(name, options)`` for :func:`ebmtrack.api.load_tracker` from the parsed flags of
    ``track`` or ``demo`` (:func:`tracker_options`: the flags and every ``--option
    KEY=VALUE``); ``options`` holds ``runtime`` where ``--runtime`` is given."""
    from ebmtrack.tracking.registry import canonical_name, get_factory

    name = canonical_name(args.tracker)
    get_factory(name)  # an unknown name: one line with the closest one
    flags = {
        "--device": getattr(args, "device", None),
        "--backbone": args.backbone,
        "--weights": args.weights,
        "--backbone-weights": args.backbone_weights,
        "--search-size": getattr(args, "search_size", None),
        "--onnx": getattr(args, "onnx", False),
        "--peer-models": args.peer_models,
    }
    items = []
    for item in getattr(args, "option", None) or []:
        key, value = parse_option(item)
        items.append((key, value, item))
    flag_of = {spec.option: flag for flag, spec in FLAGS.items() if spec.shown}

    def hint(key: str) -> str:
        return f"{flag_of[key]} FILE" if key in flag_of else f"--option {key}=VALUE"

    runtime = getattr(args, "runtime", None)
    options = tracker_options(name, flags, items, hint=hint, runtime=runtime)
    return name, options if runtime is None else {**options, "runtime": runtime}


# ``ebmtrack trackers``: what each tracker is and its options ----------------------------------
