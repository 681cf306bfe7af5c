"""``ebmtrack trackers``: the registered trackers, what each is and what it needs; with a name,
every option of that tracker with its default, what it does and the values it takes."""

from __future__ import annotations

import argparse

from ebmtrack.cli.main import CLIError
from ebmtrack.cli.tracker_options import FLAGS


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "trackers",
        help="list the trackers, what each is and the options it sets; NAME: all its options",
        description=(
            "Without NAME: every registered tracker, what it is and the options its variant "
            "sets (one screen). With NAME: every option of that tracker with its default, what "
            "it does and the values it takes, as --option KEY=VALUE takes them (track, demo; "
            "eval: --option NAME.KEY=VALUE), and the page that explains them."
        ),
    )
    parser.add_argument(
        "name", nargs="?", help="a tracker: each of its options, its default, meaning and values"
    )
    parser.set_defaults(func=run_trackers)


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return ",".join(_shown(v) for v in value)
    return "none" if value is None else str(value)


# Options a flag of track / demo / eval sets, and how the flag is written.
_OPTION_FLAGS = {
    **{
        spec.option: f"{flag} {'VALUE' if spec.value is None else ''}".strip()
        for flag, spec in FLAGS.items()
    },
    "backbone_runtime": "--onnx for onnx",
    "model_dir": "--peer-models DIR",
    "device": "--device",
}
_PATH_FLAGS = {"--weights", "--backbone-weights"}


def _print_options(name: str, width: int) -> None:
    """Each option of tracker ``name``: ``KEY=DEFAULT``, what it does, the values it takes and
    the flag that sets it, one entry each (:func:`~ebmtrack.tracking.option_docs.option_docs`,
    read from the code's own docs), then the page that explains them."""
    import textwrap

    from ebmtrack.exports import shipped_export
    from ebmtrack.tracking.option_docs import export_option_docs, option_docs, tracker_page
    from ebmtrack.tracking.registry import kind_refusal, tracker_kind
    from ebmtrack.tracking.runtime import TRAIN_EXTRA, torch_available

    # Without PyTorch a tracker of ours runs its shipped export: its options are the export's.
    lite = tracker_kind(name).backbone and not torch_available()
    if lite and shipped_export(name) is None:
        raise CLIError(f"{name} needs PyTorch: {TRAIN_EXTRA}")
    docs = export_option_docs(name) if lite else option_docs(name)
    if lite:
        note = (
            f"Without PyTorch {name} runs its shipped export: these are its options (the torch "
            f"tracker's, --runtime torch, need ebmtrack[train]: {TRAIN_EXTRA})."
        )
        print("\n".join(textwrap.wrap(note, width)))
    if not docs:
        print(f"{name}: takes no options")
    else:
        print(
            f"{name}: {len(docs)} option(s), set with --option KEY=VALUE (eval: --option "
            f"{name}.KEY=VALUE)"
        )
        print("KEY=DEFAULT, what it does [the values it takes; the flag that sets it too]")
    pad = 30
    for doc in docs:
        head = f"{doc.name}={_shown(doc.default)}"
        # A flag of a kind the tracker is not is refused (nanotrack's backbone is a file); the
        # export's options are set by --option alone (--onnx: a file it does not hold).
        refused = lite or kind_refusal(name, doc.name) is not None
        flag = "" if refused else _OPTION_FLAGS.get(doc.name, "")
        if flag.split(" ")[0] in _PATH_FLAGS:
            flag = flag.replace("VALUE", "FILE")
        notes = "; ".join(n for n in (doc.allowed, flag and f"also {flag}") if n)
        text = f"{doc.text or '(undocumented)'}" + (f" [{notes}]" if notes else "")
        first = f"  {head}".ljust(pad) if len(head) + 3 < pad else None
        lines = textwrap.wrap(text, max(width - pad, 30))
        if first is None:
            print(f"  {head}")
            first = " " * pad
        print(first + lines[0])
        for line in lines[1:]:
            print(" " * pad + line)
    print(f"What they do in full, and how they were chosen: {tracker_page(name)}")


def _needs(name: str) -> str:
    """What tracker ``name`` needs besides the default install, as the list marks it:
    ``[PyTorch] `` (ours without a shipped export), ``[--peer-models] `` (OpenCV's DNN
    trackers), else nothing."""
    from ebmtrack.exports import shipped_export
    from ebmtrack.tracking.registry import tracker_kind

    kind = tracker_kind(name)
    if kind.backbone and shipped_export(name) is None:
        return "[PyTorch] "
    return "[--peer-models] " if kind.model_files else ""


def run_trackers(args: argparse.Namespace) -> int:
    import shutil
    import textwrap

    from ebmtrack.tracking.registry import (
        TrackerVariant,
        canonical_name,
        get_factory,
        tracker_names,
    )

    width = min(shutil.get_terminal_size((100, 40)).columns, 100)
    if args.name is not None:
        name = canonical_name(args.name)
        get_factory(name)  # an unknown name: the registry's line, with the closest one
        _print_options(name, width)
        return 0
    names = tracker_names()
    pad = max(len(name) for name in names) + 2
    for name in names:
        factory = get_factory(name)
        variant = factory if isinstance(factory, TrackerVariant) else None
        summary = (variant.summary if variant else "") or "(no summary)"
        sets = ", ".join(f"{k}={_shown(v)}" for k, v in (variant.params if variant else {}).items())
        text = f"{_needs(name)}{summary.rstrip('.')}" + (f"; sets {sets}" if sets else "")
        lines = textwrap.wrap(text, width - pad) or [""]
        print(name.ljust(pad) + lines[0])
        for line in lines[1:]:
            print(" " * pad + line)
    footer = (
        "The default is atom. [PyTorch]: runs with ebmtrack[train] only (pip install "
        "'ebmtrack[train]'); [--peer-models]: reads OpenCV's ONNX files from --peer-models DIR. "
        "`ebmtrack trackers NAME` lists every option of NAME with its default; set one with "
        "--option KEY=VALUE."
    )
    print("\n".join(textwrap.wrap(footer, width)))
    return 0
