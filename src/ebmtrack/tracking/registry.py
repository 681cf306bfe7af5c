"""One registry of trackers by name, ours and the peers (OpenCV's, ``nanotrack-v3``): the one
route from a name and options (``ebmtrack track``, ``ebmtrack eval``, ``ebmtrack.load_tracker``)
to a tracker.

Each of our tracker variants is a :class:`TrackerVariant`: a factory and the named parameter set
it is built with (as pytracking's parameter files), so ``atom`` and ``atom-iounet`` are two
entries over one factory. A variant is registered beside its definition, with
:func:`register_tracker`, in the ``variants`` module of its tracker's package
(``ebmtrack/tracking/NAME/variants.py``, found and imported on the first look-up, timm style):
that one file gives it its name, its parameter set, its summary and its OpenCV-style class
(:mod:`ebmtrack.tracking.cv_style`, ``ebmtrack.TrackerATOM``). A variant names its factory and
parameter dataclass as ``"module:attribute"`` strings, imported when first needed, so that
listing the trackers imports no torch.

Options given by the caller override the parameter set's values; an option the variant does not
take is refused, naming the valid ones. Each entry also says what kind of tracker it is
(:class:`TrackerKind`: a backbone of ours, box-head weights, model files of its own), which the
command line's flags follow (:func:`trackers_of_kind`, :func:`kind_refusal`).
:meth:`TrackerVariant.check` is the one check of a tracker's options (:func:`check_options`), for
:func:`create_tracker`, ``ebmtrack.load_tracker`` and every command.

Factories must be picklable (module-level functions, classes, ``functools.partial`` of them, or
``"module:attribute"`` strings): the evaluation runner sends them to worker processes.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ebmtrack.tracking.base import Tracker
from ebmtrack.tracking.opencv import MODEL_FILES, OPENCV_TRACKERS, OpenCVTracker
from ebmtrack.values import OptionError

__all__ = [
    "TRACKERS",
    "TrackerKind",
    "TrackerVariant",
    "accepted_options",
    "check_options",
    "canonical_name",
    "create_tracker",
    "default_options",
    "get_factory",
    "kind_refusal",
    "register_tracker",
    "tracker_kind",
    "tracker_names",
    "trackers_of_kind",
]

TrackerFactory = Callable[..., Tracker]


def resolve(reference):
    """An object given itself or as a ``"module:attribute"`` string (imported now)."""
    if not isinstance(reference, str):
        return reference
    module_name, _, attr = reference.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@dataclass(frozen=True)
class TrackerKind:
    """What a tracker reads besides its parameters.

    Attributes:
        backbone: a backbone of ours (options ``backbone``, ``backbone_weights``,
            ``backbone_runtime``).
        box_head: box-head weights (option ``weights``; the tracker refuses them where its
            parameters turn the box head off).
        model_files: model files of its own (OpenCV's DNN trackers: ``model_dir`` or one option
            per file).
    """

    backbone: bool = False
    box_head: bool = False
    model_files: bool = False


# Our trackers: a backbone of ours and a box head (atom's is off unless its options turn it on).
OUR_TRACKER = TrackerKind(backbone=True, box_head=True)

# Options only a tracker of one kind takes: (the TrackerKind field, what the others are told).
_KIND_OPTIONS: dict[str, tuple[str, str]] = {
    "weights": ("box_head", "takes no box-head weights"),
    "backbone": ("backbone", "has no backbone of ours"),
    "backbone_weights": ("backbone", "has no backbone of ours"),
    "backbone_runtime": ("backbone", "has no backbone of ours"),
    "model_dir": ("model_files", "reads no model files"),
}


@dataclass(frozen=True, eq=False)
class TrackerVariant:
    """A named tracker: ``factory`` called with the parameter set ``params``, which the caller's
    options override.

    Attributes:
        factory: builds the tracker; keyword arguments only (or its ``"module:attribute"``).
        params: the variant's parameter values (fields of ``params_type``).
        params_type: the parameter dataclass (with a ``names()`` class method; or its
            ``"module:attribute"``), whose fields are options besides the factory's own keyword
            arguments (weights files, backbone).
        summary: what the variant is, in one line.
        more_options: options the factory takes through ``**kwargs`` besides those.
        kind: what kind of tracker it is (what it reads besides its parameters).
        opencv_class: the name of its OpenCV-style class (``ebmtrack.TrackerATOM``); empty: none.
        name: its registered name (set by :func:`register_tracker`), for the errors.
    """

    factory: TrackerFactory | str
    params: dict = field(default_factory=dict)
    params_type: type | str | None = None
    summary: str = ""
    more_options: tuple[str, ...] = ()
    kind: TrackerKind = TrackerKind()
    opencv_class: str = ""
    name: str = ""

    @property
    def build_function(self) -> TrackerFactory:
        """The factory itself (imported where it was named by a string)."""
        return resolve(self.factory)

    @property
    def parameters(self) -> type | None:
        """The parameter dataclass itself (imported where it was named by a string)."""
        return resolve(self.params_type)

    def options(self) -> set[str]:
        """The option names this variant takes: not those of a kind it is not
        (:class:`TrackerKind`; ``model_dir`` for ``csrt``, which its factory has as a keyword
        for the DNN trackers) unless it names them in ``more_options``."""
        names = _keyword_names(self.build_function)
        if self.params_type is not None:
            names |= set(self.parameters.names())
        names = {n for n in names if _refusal(self.kind, self.name or "", n) is None}
        return names | set(self.more_options)

    def check(self, options: dict, name: str = "") -> None:
        """The one check of this variant's options, before anything is built: renamed options
        (their new name), options it does not take (the closest or the valid ones; what kind of
        tracker it is not, for the options of a kind), its parameter dataclass's own checks of
        types, ranges and box modes, the backbone's name, box-head weights where the box mode
        reads none. Raises :class:`~ebmtrack.values.OptionError` naming the options at fault."""
        name = name or self.name or "tracker"
        params_type = self.parameters
        renamed = getattr(params_type, "renamed", None) or {}
        moved = [key for key in options if key in renamed]
        if moved:  # a new name, or what to use instead (the params class's words)
            said = [
                f"{key!r} was renamed {renamed[key]!r}"
                if renamed[key].isidentifier()
                else f"{key!r} was renamed: use {renamed[key]}"
                for key in moved
            ]
            raise OptionError(f"tracker {name!r}: option {'; '.join(said)}", *moved)
        valid = self.options()
        unknown = sorted(set(options) - valid)
        for key in unknown:
            refusal = _refusal(self.kind, name, key)
            if refusal is not None:
                raise OptionError(refusal, key)
        if unknown and not valid:
            raise OptionError(
                f"tracker {name!r} takes no option(s) {', '.join(unknown)}: it has none", *unknown
            )
        if unknown:
            hints = [_did_you_mean(key, valid) for key in unknown]
            if all(hints):  # typos: the closest names say more than the ~50 valid ones
                wrong = ", ".join(f"{key}{hint}" for key, hint in zip(unknown, hints))
                raise OptionError(f"tracker {name!r} takes no option(s) {wrong}", *unknown)
            raise OptionError(
                f"tracker {name!r} takes no option(s) {', '.join(unknown)}; "
                f"its options: {', '.join(sorted(valid))}",
                *unknown,
            )
        merged = {**self.params, **options}
        if dataclasses.is_dataclass(params_type):
            fields = {f.name for f in dataclasses.fields(params_type)}
            params = params_type(**{k: v for k, v in merged.items() if k in fields})
            head_modes = getattr(params, "head_modes", ())
            mode = getattr(params, "box_mode", None)
            if options.get("weights") is not None and head_modes and mode not in head_modes:
                raise OptionError(
                    f"tracker {name!r} with box_mode={mode!r} reads no box-head weights "
                    f"(box_mode {' or '.join(head_modes)} does)",
                    "weights",
                    "box_mode",
                )
        backbone = merged.get("backbone")
        if self.kind.backbone and isinstance(backbone, str):
            from ebmtrack.models.backbones import check_backbone_name  # torch: ours only

            check_backbone_name(backbone)

    def build(self, **options) -> Tracker:
        """The tracker, its options not checked (:meth:`check`)."""
        return self.build_function(**{**self.params, **options})

    def __call__(self, **options) -> Tracker:
        """:meth:`check`, then :meth:`build`."""
        self.check(options)
        return self.build(**options)


def _keyword_names(factory: Callable) -> set[str]:
    return {
        p.name
        for p in inspect.signature(factory).parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


TRACKERS: dict[str, TrackerFactory] = {
    kind: TrackerVariant(
        functools.partial(OpenCVTracker, kind),
        summary=f"OpenCV's {kind}",
        more_options=tuple(MODEL_FILES.get(kind, ())),
        kind=TrackerKind(model_files=kind in MODEL_FILES),
    )
    for kind in OPENCV_TRACKERS
}
# NanoTrack v3 with its authors' own tracker logic on the networks shipped in the package
# (ebmtrack.tracking.nanotrack): a peer that ONNX Runtime runs, with no options and no model
# files to give (OpenCV's TrackerNano runs v2's only).
TRACKERS["nanotrack-v3"] = TrackerVariant(
    "ebmtrack.tracking.nanotrack:create_nanotrack_v3",
    summary="NanoTrack v3 with its authors' tracker logic (their networks, shipped; ONNX "
    "Runtime, no PyTorch)",
    name="nanotrack-v3",
)

_DISCOVERED = False


def _discover() -> None:
    """Import the ``variants`` module of every tracker package under ``ebmtrack/tracking`` (they
    register their variants; light modules, no torch), once."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    root = Path(__file__).resolve().parent
    for package in sorted(path.parent.name for path in root.glob("*/variants.py")):
        importlib.import_module(f"{__package__}.{package}.variants")


def register_tracker(name: str, factory: TrackerFactory, replace: bool = False):
    """Make ``factory(**options)`` available as tracker ``name``; returns what was registered
    (a variant named ``name`` where ``factory`` is an unnamed one), so that a module can define
    and register a variant in one statement.

    Raises ValueError if ``name`` is taken (unless ``replace``) or is not made of lower-case
    letters, digits, ``-``, ``_`` and ``+`` (names appear in file paths and comma-separated
    command-line lists).
    """
    plain = name.replace("_", "").replace("-", "").replace("+", "")
    if not plain or not plain.isalnum() or name != name.lower():
        raise ValueError(
            f"tracker name must be lower-case letters, digits, -, _ or +, got {name!r}"
        )
    if name in TRACKERS and not replace:
        raise ValueError(f"tracker {name!r} is already registered")
    if isinstance(factory, TrackerVariant) and not factory.name:
        factory = dataclasses.replace(factory, name=name)
    TRACKERS[name] = factory
    return factory


def canonical_name(name: str) -> str:
    """The registered spelling of a tracker name: names are case-insensitive (``ATOM`` is
    ``atom``) and surrounding blanks are ignored."""
    return name.strip().lower()


def _did_you_mean(word: str, choices) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get_factory(name: str) -> TrackerFactory:
    """The factory registered as ``name`` (any case); ValueError with the closest name and the
    valid ones otherwise."""
    name = canonical_name(name)
    if name not in TRACKERS:
        _discover()
    try:
        return TRACKERS[name]
    except KeyError:
        raise ValueError(
            f"unknown tracker {name!r}{_did_you_mean(name, TRACKERS)}; valid trackers: "
            f"{', '.join(sorted(TRACKERS))}"
        ) from None


def tracker_names() -> list[str]:
    """Every registered name, sorted."""
    _discover()
    return sorted(TRACKERS)


def tracker_kind(name: str) -> TrackerKind:
    """What kind of tracker ``name`` is (a factory that is not a :class:`TrackerVariant`:
    none of the kinds)."""
    factory = get_factory(name)
    return factory.kind if isinstance(factory, TrackerVariant) else TrackerKind()


def trackers_of_kind(**fields: bool) -> list[str]:
    """The registered names whose :class:`TrackerKind` has these field values, sorted, e.g.
    ``trackers_of_kind(box_head=True)``."""
    unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(TrackerKind)})
    if unknown:
        raise ValueError(f"TrackerKind has no field(s) {', '.join(unknown)}")
    return [
        name
        for name in tracker_names()
        if all(getattr(tracker_kind(name), key) == value for key, value in fields.items())
    ]


def _refusal(kind: TrackerKind, name: str, option: str) -> str | None:
    needs = _KIND_OPTIONS.get(option)
    if needs is None or getattr(kind, needs[0]):
        return None
    return f"tracker {name!r} {needs[1]}"


def kind_refusal(name: str, option: str) -> str | None:
    """Why tracker ``name`` cannot take ``option`` when the option needs a kind of tracker
    (:class:`TrackerKind`) it is not, e.g. ``tracker 'csrt' takes no box-head weights``; None
    otherwise."""
    return _refusal(tracker_kind(name), canonical_name(name), option)


def accepted_options(name: str) -> set[str]:
    """Keyword options the factory of ``name`` accepts (for a plain factory that also takes
    ``**kwargs``, the named ones)."""
    factory = get_factory(name)
    if isinstance(factory, TrackerVariant):
        return factory.options()
    return _keyword_names(factory)


def check_options(name: str, options: dict) -> None:
    """Raise :class:`~ebmtrack.values.OptionError` if tracker ``name`` cannot take one of
    ``options`` (:meth:`TrackerVariant.check`; for a plain factory, an option it has no keyword
    for, unless it takes ``**kwargs`` and checks them itself)."""
    name = canonical_name(name)
    factory = get_factory(name)
    if isinstance(factory, TrackerVariant):
        factory.check(options, name)
        return
    parameters = inspect.signature(factory).parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        return
    valid = _keyword_names(factory)
    unknown = sorted(set(options) - valid)
    if unknown:
        raise OptionError(
            f"tracker {name!r} takes no option(s) {', '.join(unknown)}; "
            f"its options: {', '.join(sorted(valid))}",
            *unknown,
        )


def default_options(name: str) -> dict:
    """The value each option of tracker ``name`` has when the caller gives none (as far as
    the factory declares it: its keyword defaults, its parameter dataclass's defaults and the
    variant's parameter set), e.g. to tell an option that changes nothing from one that does."""
    factory = get_factory(name)
    target = factory.build_function if isinstance(factory, TrackerVariant) else factory
    defaults = {
        p.name: p.default
        for p in inspect.signature(target).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    if isinstance(factory, TrackerVariant):
        if dataclasses.is_dataclass(factory.parameters):
            for f in dataclasses.fields(factory.parameters):
                if f.default is not dataclasses.MISSING:
                    defaults[f.name] = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    defaults[f.name] = f.default_factory()
        defaults.update(factory.params)
    return defaults


def create_tracker(name: str, **options) -> Tracker:
    """A new tracker ``name`` (any case) built with ``options``; ValueError for an unknown name,
    :class:`~ebmtrack.values.OptionError` for an option it cannot take (checked once,
    :func:`check_options`)."""
    check_options(name, options)
    factory = get_factory(name)
    return factory.build(**options) if isinstance(factory, TrackerVariant) else factory(**options)
