"""Which runtime runs a tracker: ``lite``, the tracker's export shipped in the package run by
ONNX Runtime and NumPy (:mod:`ebmtrack.lite`, :mod:`ebmtrack.exports`; no PyTorch), or ``torch``,
the torch tracker the export is made from (``pip install 'ebmtrack[train]'``), the reference the
runtime is tested against.

A tracker that ships an export runs ``lite`` unless ``torch`` is asked for; the others (``atom-lt``,
``dimp-nce+``, OpenCV's peers) run as they always did (OpenCV's peers need no PyTorch). This
module is the one route from a name, a runtime and options to a tracker (:func:`build_tracker`,
behind ``ebmtrack.load_tracker`` and every command), and it imports no PyTorch.
"""

from __future__ import annotations

import json
from functools import cache

from ebmtrack.lite.option_checks import TRAIN_EXTRA
from ebmtrack.values import OptionError

__all__ = [
    "RUNTIMES",
    "TRAIN_EXTRA",
    "TorchMissing",
    "build_tracker",
    "check_lite_options",
    "lite_options",
    "require_torch",
    "resolve_runtime",
    "shipped_lite_export",
    "torch_available",
]

RUNTIMES = ("lite", "torch")

# Options of the runtime's own besides the export's parameters (ebmtrack.lite.load's).
_LITE_ARGUMENTS = ("backbone_runtime", "training_dtype")


class TorchMissing(ValueError):
    """What needs PyTorch where it is not installed: one line naming the extra."""


def torch_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def require_torch(what: str) -> None:
    """Raise :class:`TorchMissing` (``WHAT needs PyTorch: pip install 'ebmtrack[train]'``)
    where PyTorch is not installed."""
    if not torch_available():
        raise TorchMissing(f"{what} needs PyTorch: {TRAIN_EXTRA}")


def _canonical(name: str) -> str:
    from ebmtrack.tracking.registry import canonical_name

    return canonical_name(name)


def _is_ours(name: str) -> bool:
    """Whether tracker ``name`` is one of ours (a torch tracker), not one of OpenCV's."""
    from ebmtrack.tracking.registry import tracker_kind

    return tracker_kind(name).backbone


def resolve_runtime(name: str, runtime: str | None = None) -> str:
    """The runtime tracker ``name`` runs: ``runtime`` checked, or by default ``lite`` where the
    tracker ships an export and ``torch`` (its own path) elsewhere. ValueError for an unknown
    runtime or ``lite`` for a tracker that ships no export."""
    from ebmtrack.exports import SHIPPED_EXPORTS, shipped_export

    if runtime is not None and runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    shipped = shipped_export(_canonical(name)) is not None
    if runtime == "lite" and not shipped:
        raise ValueError(
            f"tracker {name!r} ships no export for the torch-free runtime (those that do: "
            f"{', '.join(SHIPPED_EXPORTS)}): use runtime='torch' (--runtime torch)"
        )
    return runtime or ("lite" if shipped else "torch")


@cache
def shipped_lite_export(name: str):
    """Tracker ``name``'s shipped export (an :class:`ebmtrack.lite.files.Export`) as
    :func:`ebmtrack.lite.params.merge_options` reads it: its manifest and parameters, read
    once (its files are checked when a tracker is built from it)."""
    from ebmtrack.exports import shipped_export
    from ebmtrack.lite.files import Export, read_manifest

    folder = shipped_export(name)
    params = json.loads((folder / "params.json").read_text(encoding="utf-8"))
    return Export(folder, read_manifest(folder), params)


@cache
def lite_options(name: str) -> frozenset[str]:
    """The options the runtime takes for tracker ``name``'s shipped export: its parameters less
    those the graphs fix, and the runtime's own (``backbone_runtime``, ``training_dtype``)."""
    from ebmtrack.lite.params import FIXED

    return frozenset(set(shipped_lite_export(name).params) - set(FIXED) | set(_LITE_ARGUMENTS))


def _backbone_files(name: str) -> tuple[str, ...]:
    """The backbone runtimes whose file ``name``'s shipped export holds (``onnx-int8``)."""
    return tuple(sorted(shipped_lite_export(name).manifest["backbone"]["files"]))


# Where the refusals of the torch tracker's options send the user: both need ebmtrack[train].
_USE_TORCH = "use runtime='torch' (--runtime torch) or {export}; both need PyTorch: " + TRAIN_EXTRA


def check_lite_options(name: str, options: dict) -> None:
    """Refuse, as :class:`~ebmtrack.values.OptionError` naming them, the options the runtime
    does not take for ``name``'s shipped export: those only the torch tracker takes (its files,
    its device, precision and search size, which the export fixes) say to use the torch
    runtime; then the values, as :func:`ebmtrack.lite.load` checks them
    (:func:`ebmtrack.lite.params.merge_options`: their kinds and ranges, the box mode's
    parts), before anything is built."""
    valid = lite_options(name)
    unknown = sorted(set(options) - valid)
    runtime = options.get("backbone_runtime", "auto")
    files = _backbone_files(name)
    if not unknown:
        from ebmtrack.lite.params import backbone_runtime_error, one_pass

        params = shipped_lite_export(name).params | options
        single = one_pass(params.get("classifier_features"), params.get("box_mode", ""))
        wrong = backbone_runtime_error(single, runtime)
        if wrong is not None:
            raise OptionError(wrong, "backbone_runtime")
    if not unknown and runtime != "auto" and runtime not in files:
        raise OptionError(
            f"tracker {name!r}: backbone_runtime={runtime!r}: the shipped export holds "
            f"{', '.join(files)} only: "
            + _USE_TORCH.format(export="an export of your own (ebmtrack export)"),
            "backbone_runtime",
        )
    if not unknown:
        from ebmtrack.lite.params import merge_options

        # the values, as the runtime checks them when it builds the tracker
        merge_options(
            shipped_lite_export(name),
            {k: v for k, v in options.items() if k not in _LITE_ARGUMENTS},
        )
        return
    import difflib

    known = valid | set(_TORCH_ONLY)
    close = [difflib.get_close_matches(key, known, n=1) for key in unknown]
    torch_only = [key for key in unknown if key in _TORCH_ONLY]
    if not torch_only and all(close):  # typos: the closest names
        wrong = ", ".join(f"{key} (did you mean {hint[0]!r}?)" for key, hint in zip(unknown, close))
        raise OptionError(f"tracker {name!r} takes no option(s) {wrong}", *unknown)
    if not torch_only:
        raise OptionError(
            f"tracker {name!r} takes no option(s) {', '.join(unknown)}; its options: "
            f"{', '.join(sorted(valid))}",
            *unknown,
        )
    raise OptionError(
        f"tracker {name!r}: option(s) {', '.join(torch_only)} only the torch tracker takes (the "
        "shipped export fixes its files, search size, device and precision): "
        + _USE_TORCH.format(export="export it with them (ebmtrack export --option)"),
        *torch_only,
    )


# Options of the torch trackers that the export fixes (or that choose its files).
_TORCH_ONLY = (
    "weights",
    "backbone",
    "backbone_weights",
    "search_size",
    "device",
    "precision",
    "projection_dim",
    "filter_size",
    "calibrator",
    "box_climb",
)


def build_tracker(name: str, runtime: str | None = None, **options):
    """Tracker ``name`` with ``options`` on ``runtime`` (:func:`resolve_runtime`); picklable
    with :func:`functools.partial` (``eval``'s workers build their trackers with it).

    The runtime's tracker takes ``threads`` (ONNX Runtime's intra-op threads; default: the
    process's, :func:`ebmtrack.process.configured_threads`) among ``options``; the torch
    tracker's threads are set process-wide by the caller
    (:func:`ebmtrack.process.configure_threads`).

    Raises:
        ValueError: an unknown tracker or runtime, an option the runtime does not take
            (:class:`~ebmtrack.values.OptionError`), a tracker that needs PyTorch where it is
            not installed (:class:`TorchMissing`, one line naming the extra).
    """
    from ebmtrack.tracking.registry import create_tracker, get_factory

    name = _canonical(name)
    get_factory(name)  # an unknown name: the registry's line, with the closest one
    threads = options.pop("threads", None)
    if resolve_runtime(name, runtime) == "lite":
        from ebmtrack.exports import shipped_export
        from ebmtrack.lite.tracker import load

        check_lite_options(name, options)
        if threads is None:
            from ebmtrack.process import configured_threads

            threads = configured_threads()
        return load(shipped_export(name), threads=threads, **options)
    if _is_ours(name):
        require_torch(f"tracker {name!r} (runtime torch)" if runtime else f"tracker {name!r}")
    return create_tracker(name, **options)
