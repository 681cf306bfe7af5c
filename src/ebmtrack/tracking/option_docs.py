"""What each option of a registered tracker does and which values it takes, read from the code's
own documentation: the field entries of its parameter dataclass's docstring (``name: what it
does``, the class that declares the field first), the ``Args:`` of its factory, and the checks
the options go through (:meth:`~ebmtrack.tracking.registry.TrackerVariant.check`), so that
``ebmtrack trackers NAME`` never holds a second copy that could drift. Where PyTorch is not
installed, a tracker that ships an export is documented from it (:func:`export_option_docs`):
its options and defaults from the export's parameters, the same texts read from the parameter
dataclass's source (not imported: it needs torch).

>>> [(d.name, d.allowed) for d in option_docs("atom") if d.name == "box_climb"]
[('box_climb', 'one of iou, ebm')]
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
import re
import typing
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ebmtrack.lite.option_checks import KINDS, RANGES, kind_of
from ebmtrack.values import OptionError

__all__ = ["OptionDoc", "docstring_entries", "export_option_docs", "option_docs", "tracker_page"]

# A docstring entry: ``name: text`` or ``a, b, c: text`` at the start of an indented line.
_ENTRY = re.compile(r"^(\s+)(\*{0,2}[A-Za-z_]\w*(?:, [A-Za-z_]\w*)*): (.+)$")
_ROLE = re.compile(r":\w+:`~?([\w.\s]+)`")
# The pages that document each tracker package's options (by the factory's package).
PAGES = {"atom": "docs/atom.md", "dimp": "docs/dimp.md", "opencv": "docs/evaluation.md"}
_PROBES = {str: "\x01"}  # a value no text option takes: its check says the valid ones


@dataclass(frozen=True)
class OptionDoc:
    """One option of a tracker.

    Attributes:
        name: the option (``--option NAME=VALUE``).
        default: its value when none is given (the variant's, else the dataclass's).
        text: what it does, the first sentence of its own documentation.
        allowed: the values it takes, as its check says them (``one of iou, ebm``, ``in (0,
            1]``) or else its kind (``a number``, ``a list``, ``a file``).
    """

    name: str
    default: object
    text: str
    allowed: str


def docstring_entries(obj) -> dict[str, str]:
    """``name -> text`` of every ``name: text`` entry of ``obj``'s docstring (or of ``obj``, a
    docstring) (``Args:``, ``Attributes:`` and the parameter dataclasses' sections); an entry
    naming several fields (``a, b: text``) gives each the text; continuation lines (deeper
    indented) are joined."""
    entries: dict[str, str] = {}
    current: list[str] | None = None
    indent = 0
    doc = inspect.cleandoc(obj) if isinstance(obj, str) else inspect.getdoc(obj)
    for line in (doc or "").splitlines():
        depth = len(line) - len(line.lstrip())
        match = _ENTRY.match(" " + line) if line.strip() else None
        if match and (current is None or len(match.group(1)) - 1 <= indent):
            indent = len(match.group(1)) - 1
            current = [match.group(3)]
            for name in match.group(2).split(", "):
                entries[name.lstrip("*")] = current  # type: ignore[assignment]
        elif current is not None and line.strip() and depth > indent:
            current.append(line.strip())
        else:
            current = None
    return {name: " ".join(parts) for name, parts in entries.items()}  # type: ignore[arg-type]


def _plain(text: str) -> str:
    """Docstring markup out: ``x`` -> x, :class:`~a.b.C` -> C."""
    text = _ROLE.sub(lambda m: "".join(m.group(1).split()).rsplit(".", 1)[-1], text)
    return re.sub(r"``([^`]*)``", r"\1", text)


def _first_sentence(text: str, longest: int = 120) -> str:
    """Up to the first full stop that ends a sentence (not ``e.g.``, ``eq. 2``, ``0.5``); a
    longer one up to its first clause (``: `` or ``; ``), with ``...``."""
    match = re.search(r"(?<!e\.g)(?<!i\.e)(?<!eq)\.(\s|$)", text)
    sentence = text[: match.start() + 1] if match else text
    if len(sentence) > longest:
        depth = 0
        for index, char in enumerate(sentence):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and index > 15 and sentence[index : index + 2] in (": ", "; "):
                return sentence[:index] + " ..."
    return sentence


def _resolve(reference: str):
    """The object a ``:class:`` / ``:func:`` reference names (None if it does not import)."""
    module, _, attribute = "".join(reference.split()).lstrip("~").rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError):
        return None


def _referenced(text: str, name: str) -> str | None:
    """For ``see :class:`X``` the entry ``name`` of X's docstring (read from its source)."""
    match = re.match(r"see :\w+:`~?([^`]+)`", text)
    if not match:
        return None
    module, _, attribute = "".join(match.group(1).split()).rpartition(".")
    found = _source_class(module, attribute) if module else None
    return docstring_entries(found[0]).get(name) if found else None


@cache
def _source_class(module: str, name: str) -> tuple[str, tuple[str, ...], tuple] | None:
    """Class ``name`` of ``module`` read from its source, not imported (a torch module's
    documentation where torch is not installed): (its docstring, the fields it annotates but
    its ClassVars, its bases as ``(module, name)``); None where it is not found."""
    try:
        spec = importlib.util.find_spec(module)  # imports the parent packages only
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            fields = tuple(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and "ClassVar" not in ast.unparse(item.annotation)
            )
            bases = tuple(
                imported.get(base.id, (module, base.id))
                for base in node.bases
                if isinstance(base, ast.Name)
            )
            return ast.get_docstring(node) or "", fields, bases
    return None


def _source_mro(module: str, name: str) -> list[tuple[str, tuple[str, ...]]]:
    """(docstring, fields) of class ``name`` of ``module`` and of its bases, the class first
    (:func:`_source_class`; each base once, after every class that derives from it)."""
    order: list[tuple[str, str]] = []

    def visit(key: tuple[str, str]) -> None:
        if key in order:
            order.remove(key)
        order.append(key)
        found = _source_class(*key)
        for base in found[2] if found else ():
            visit(base)

    visit((module, name))
    return [found[:2] for key in order if (found := _source_class(*key))]


def _factory_texts(target) -> dict[str, str]:
    """The ``Args:`` of a factory (a class: of it and its ``__init__``); entries it lacks come
    from the callables its docstring names (``built as :func:`X` builds ...``)."""
    texts = docstring_entries(target)
    if inspect.isclass(target):
        texts = {**texts, **docstring_entries(target.__init__)}
    for reference in re.findall(r":func:`([^`]+)`", inspect.getdoc(target) or ""):
        named = _resolve(reference)
        if named is not None:
            texts = {**docstring_entries(named), **texts}
    return texts


def _field_texts(module: str, name: str) -> dict[str, str]:
    """Each field of parameter dataclass ``name`` of ``module`` -> its text, from the class
    that declares it first (a subclass that changes a default only keeps the base class's
    description), read from the source (:func:`_source_mro`: no import, no torch)."""
    texts: dict[str, str] = {}
    for doc, fields in reversed(_source_mro(module, name)):
        own = docstring_entries(doc)
        for field in fields:
            if field not in texts and field in own:
                texts[field] = _referenced(own[field], field) or own[field]
    return texts


def _kind(annotation) -> str:
    if annotation in KINDS:
        return KINDS[annotation]
    others = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(others) == 1 and len(typing.get_args(annotation)) == 2:  # X | None
        return f"{_kind(others[0])} or none".lstrip()
    text = str(annotation)
    if typing.get_origin(annotation) is tuple or text.startswith("tuple"):
        return "a list"
    if "Path" in text:
        return "a path or none"
    return ""


def _said(err: Exception, name: str) -> str | None:
    """What an option's check says its value must be (``one of iou, ebm``, ``in (0, 1]``,
    ``must exceed the 30 first-frame samples``), when the error is about ``name``."""
    if isinstance(err, OptionError) and name not in err.options:
        return None
    text = str(err)
    valid = re.search(r"valid names: \[(.+)\]", text)
    if valid:
        return "one of " + valid.group(1).replace("'", "")
    said = re.search(rf"{name} must (.+?)(?:, got |$)", text)
    if not said:
        return None
    rule = said.group(1).rstrip(".")
    return rule[3:] if rule.startswith("be ") else f"must {rule}"


def _allowed(name: str, annotation, checks) -> str:
    """What option ``name`` takes: its range (:data:`~ebmtrack.lite.option_checks.RANGES`), else
    what its check says for a text no option takes (``checks``: callables given the value, in
    order), else its kind."""
    if name in RANGES:
        return str(RANGES[name])
    probe = _PROBES.get(annotation)
    for check in checks if probe is not None else ():
        try:
            check(probe)
        except (ValueError, TypeError) as err:
            said = _said(err, name)
            if said:
                return said
    return _kind(annotation)


def _variant_checks(variant, name: str) -> list:
    """The checks of an option of ``variant``: its parameter dataclass's own (with its
    defaults), then the variant's (with its parameter set)."""
    params_type = variant.parameters
    checks = [lambda value: variant.check({name: value})]
    if dataclasses.is_dataclass(params_type) and name in params_type.__dataclass_fields__:
        checks.insert(0, lambda value: params_type(**{name: value}))
    return checks


def tracker_page(name: str) -> str:
    """The page that documents tracker ``name`` and its options."""
    from ebmtrack.tracking.registry import TrackerVariant, get_factory

    factory = get_factory(name)
    target = factory.factory if isinstance(factory, TrackerVariant) else factory
    module = target if isinstance(target, str) else getattr(target, "__module__", "") or ""
    if not isinstance(target, str) and hasattr(target, "func"):  # functools.partial
        module = target.func.__module__
    parts = module.split(":")[0].split(".")
    package = parts[2] if len(parts) > 2 and parts[:2] == ["ebmtrack", "tracking"] else ""
    return PAGES.get(package, "docs/guide.md")


def option_docs(name: str) -> list[OptionDoc]:
    """Every option tracker ``name`` takes
    (:func:`~ebmtrack.tracking.registry.accepted_options`), sorted, with its default, what it
    does and its allowed values."""
    from ebmtrack.tracking.registry import (
        TrackerVariant,
        accepted_options,
        canonical_name,
        default_options,
        get_factory,
    )

    name = canonical_name(name)
    factory = get_factory(name)
    defaults = default_options(name)
    texts: dict[str, str] = {}
    hints: dict[str, object] = {}
    if isinstance(factory, TrackerVariant):
        build = factory.build_function
        target = getattr(build, "func", build)  # a functools.partial: the callable
        function = target.__init__ if inspect.isclass(target) else target
        texts.update(_factory_texts(target))
        hints.update(typing.get_type_hints(function))
        spread = next(
            (
                p.name
                for p in inspect.signature(function).parameters.values()
                if p.kind == p.VAR_KEYWORD
            ),
            None,
        )
        for extra in factory.more_options:  # taken through **kwargs: that entry and type
            if spread is not None:
                texts.setdefault(extra, texts.get(spread, ""))
                hints.setdefault(extra, hints.get(spread))
        params_type = factory.parameters
        if dataclasses.is_dataclass(params_type):
            texts.update(_field_texts(params_type.__module__, params_type.__qualname__))
            hints.update(typing.get_type_hints(params_type))
    docs = []
    for option in sorted(accepted_options(name)):
        text = _first_sentence(" ".join(_plain(texts.get(option, "")).split()))
        checks = _variant_checks(factory, option) if isinstance(factory, TrackerVariant) else []
        allowed = _allowed(option, hints.get(option), checks)
        docs.append(OptionDoc(option, defaults.get(option), text, allowed))
    return docs


def export_option_docs(name: str) -> list[OptionDoc]:
    """Every option the torch-free runtime takes for tracker ``name``'s shipped export
    (:func:`~ebmtrack.tracking.runtime.lite_options`), sorted, with its default (the export's
    parameters, the runtime's own arguments), what it does (the runtime's arguments, then the
    parameter dataclass's fields, read from their source) and its allowed values (as the
    runtime checks them, :func:`ebmtrack.lite.params.merge_options`). No PyTorch."""
    from ebmtrack.lite.params import merge_options
    from ebmtrack.lite.tracker import load
    from ebmtrack.tracking.registry import canonical_name, get_factory
    from ebmtrack.tracking.runtime import lite_options, shipped_lite_export

    name = canonical_name(name)
    export = shipped_lite_export(name)
    params_type = get_factory(name).params_type  # "module:Class": not imported (torch)
    texts = _field_texts(*params_type.split(":")) if isinstance(params_type, str) else {}
    arguments = inspect.signature(load).parameters
    texts.update({k: v for k, v in docstring_entries(load).items() if k in arguments})
    docs = []
    for option in sorted(lite_options(name)):
        default = export.params[option] if option in export.params else arguments[option].default
        default = tuple(default) if isinstance(default, list) else default
        checks = (
            []
            if option in arguments
            else [lambda value, option=option: merge_options(export, {option: value})]
        )
        text = _first_sentence(" ".join(_plain(texts.get(option, "")).split()))
        docs.append(OptionDoc(option, default, text, _allowed(option, kind_of(default), checks)))
    return docs
