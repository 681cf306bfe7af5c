"""The docs describe the present: every registered tracker is listed, and no text in the
repository points at the development process instead of the code."""

import re
from pathlib import Path

import pytest

from ebmtrack.tracking.registry import tracker_names

ROOT = Path(__file__).resolve().parents[1]
TEXT_FOLDERS = ("docs", "src", "tests", "benchmarks", "studies", "scripts")


def _text_files():
    yield ROOT / "README.md"
    for folder in TEXT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".md", ".py", ".sh", ".toml", ".yaml", ".json"):
                yield path


def test_architecture_lists_every_registered_tracker():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("## Trackers", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in tracker_names() if f"`{name}`" not in table]
    assert not missing, f"docs/architecture.md, Trackers: not listed: {missing}"


def test_no_text_names_development_sessions_or_issue_numbers():
    pattern = re.compile(r"\b(session|issue)\s+\d+", re.IGNORECASE)
    found = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _number_in(number: str, text: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text) is not None


def test_readme_numbers_come_from_the_results_pages_it_links():
    """Every number of the README's Results section is on a results page the section links to
    (a number changed in one place only shows here)."""
    results = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Results")
    links = sorted(set(re.findall(r"\((docs/results/[\w./-]+\.md)\)", results)))
    assert len(links) >= 2, links
    pages = "\n".join((ROOT / link).read_text(encoding="utf-8") for link in links)
    numbers = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", results))
    assert len(numbers) > 10
    missing = sorted(n for n in numbers if not _number_in(n, pages))
    assert not missing, f"README Results: not on {', '.join(links)}: {missing}"


@pytest.mark.parametrize(
    ("page", "section"), [("README.md", "Results"), ("docs/guide.md", "Results in detail")]
)
def test_readme_tracker_table_matches_the_tracking_page(page, section):
    """Each tracker of the README's table (and of its longer copy in docs/guide.md) has the AUC
    of its row in the newest 13-sequence table of docs/results/tracking.md that lists it (the
    sections are dated, newest first)."""
    readme = _section((ROOT / page).read_text(encoding="utf-8"), section)
    tracking = (ROOT / "docs" / "results" / "tracking.md").read_text(encoding="utf-8")
    sections = tracking.split("## All 13 test sequences")[1:]
    tables = [section.split("\n## ", 1)[0] for section in sections]

    def rows(text):
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            name = re.match(r"`([\w+-]+)`", cells[0]) if len(cells) >= 3 else None
            auc = re.search(r"\d+\.\d+", cells[-1]) if name else None
            if auc:
                yield cells[0], auc.group(0)

    where, page = page, {}
    for table in reversed(tables):  # newer sections overwrite older rows
        page.update(rows(table))
    checked = 0
    for label, auc in rows(readme):
        if label in page:
            assert page[label] == auc, f"{where} {label}: {auc}, tracking.md: {page[label]}"
            checked += 1
    assert checked >= 4, f"only {checked} {where} rows found in tracking.md's table"


def test_the_demo_score_is_the_same_on_every_page():
    # A demo AUC may depend on the CPU (an int8 backbone's does): the README states the one
    # measured (and on which CPU), docs/demo.md shows that run's output and docs/guide.md names it.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    demo = (ROOT / "docs" / "demo.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    ((auc, cpu),) = re.findall(r"\*Couple\*; AUC (\d+\.\d) on an? ([\w ]+?),", readme)
    (shown,) = re.findall(r"^AUC\s+(\d+\.\d)$", demo, re.MULTILINE)
    assert shown == auc and cpu in demo
    assert f"AUC {auc} on {'an' if cpu[0] in 'AEIOU' else 'a'} {cpu}" in " ".join(guide.split())


def test_every_command_named_in_the_text_runs_a_file_or_module_that_exists():
    """``python studies/NAME.py``, ``python benchmarks/NAME.py`` and ``python -m ebmtrack...`` in
    any text (commands broken over lines too) name a script or module of the repository."""
    import importlib.util

    script = re.compile(r"python\s+((?:studies|benchmarks|scripts)/[a-z0-9_/]+\.py)")
    module = re.compile(r"python\s+-m\s+(ebmtrack(?:\.\w+)*)")
    missing, checked = [], 0
    for path in _text_files():
        text = path.read_text(encoding="utf-8")
        for name in script.findall(text):
            checked += 1
            if not (ROOT / name).is_file():
                missing.append(f"{path.relative_to(ROOT)}: {name}")
        for name in module.findall(text):
            checked += 1
            if importlib.util.find_spec(name) is None:
                missing.append(f"{path.relative_to(ROOT)}: python -m {name}")
    assert checked > 20, checked
    assert not missing, "\n".join(missing)


PEERS = ROOT / "docs" / "results" / "peers.md"
_NUMBER = re.compile(r"\d+\.\d")


def _peer_table() -> list[dict]:
    """The rows of OpenCV's NanoTrack (v2, ``nanotrack``) in the one table of the peers in
    docs/results/peers.md (v3's rows name their version and are quoted as such)."""
    section = _section(PEERS.read_text(encoding="utf-8"), "NanoTrack's numbers")
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|"))))
        if "`nanotrack`" not in cells["tracker"]:
            continue
        opencv = cells["OpenCV (`opencv-contrib-python-headless`)"]
        version = re.search(r"\d+(?:\.\d+){2,3}", opencv)
        rows.append({"sequences": cells["sequences"], "opencv": version.group(0),
                     "AUC": cells["AUC"], "OP75": cells["OP75"]})
    return rows


def _nanotrack_quotes():
    """(page:line, AUC or None, OP75 or None, OpenCV version or None, sequences or None) of
    every NanoTrack number on a page: a table row of the peer itself (not "NanoTrack's
    backbone") with an AUC or OP75 column, and "NanoTrack 69.6 / 48.8" in prose."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        header: list[str] = []
        section = _section(PEERS.read_text(encoding="utf-8"), "NanoTrack's numbers")
        text = page.read_text(encoding="utf-8")
        if page == PEERS:
            text = text.replace(section, "")  # the table itself
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{page.relative_to(ROOT)}:{number}"
            if not line.startswith("|"):
                header = []
                for auc, op75 in re.findall(r"NanoTrack(?:'s)? (\d+\.\d) / (\d+\.\d)", line):
                    yield where, auc, op75, None, None
                continue
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if not header:
                header = cells
                continue
            first = cells[0].replace("`", "").replace("*", "")
            if not re.match(r"nanotrack($|,\s*opencv| \(opencv)", first, re.IGNORECASE):
                continue
            row = dict(zip(header, cells))
            # AUC columns of the one-pass protocol ("AUC present" is the long-term one's).
            auc = next((v for k, v in row.items() if re.match(r"AUC(?! present)", k)), None)
            op75 = next((v for k, v in row.items() if k.startswith("OP75")), None)
            op75 = op75 or (re.search(r"OP75 (\d+\.\d)", auc or "") or [None, None])[1]
            version = re.search(r"OpenCV (\d+(?:\.\d+){2,3})", line + " ".join(header))
            found = [_NUMBER.search(v).group(0) if v and _NUMBER.search(v) else None
                     for v in (auc, op75)]
            if any(found):
                yield where, *found, version and version.group(1), row.get("sequences")


def test_every_page_quotes_nanotracks_numbers_from_its_one_table():
    """A NanoTrack AUC / OP75 anywhere is a row of the dated table in docs/results/peers.md:
    the pair from one row, the row of the OpenCV it names, the 5-sequence row only with 5/5
    (69.5 / 43.1, 5.0's AUC on the 13 with the OP75 of 5 other sequences, made a head look 7
    OP75 points ahead of NanoTrack instead of 1)."""
    rows = _peer_table()
    assert [r["AUC"] for r in rows if r["sequences"] == "the 13" and r["opencv"] == "5.1.0.95"] \
        == ["69.6"]
    wrong = []
    for where, auc, op75, version, sequences in _nanotrack_quotes():
        fits = [
            r for r in rows
            if auc in (None, r["AUC"]) and op75 in (None, r["OP75"])
            and version in (None, r["opencv"])
            and (sequences is None or (sequences == "5/5") == (r["sequences"] != "the 13"))
        ]
        if not fits:
            wrong.append(f"{where}: AUC {auc}, OP75 {op75}, OpenCV {version}, {sequences}")
    assert not wrong, "NanoTrack numbers that are no row of docs/results/peers.md:\n" + "\n".join(
        wrong
    )
    quoted = list(_nanotrack_quotes())
    assert len(quoted) >= 10 and any(w.startswith("README.md") for w, *_ in quoted)


def test_a_box_mode_named_as_a_trackers_is_that_trackers():
    """Where a page (not a dated record of docs/results/) pairs a box mode with a shipped
    tracker (```siamese`: `atom``` or ```refine` (`atom-iounet`)``), it is the box mode of that
    tracker's shipped export (``scale``, the default until 6 Dec 2026, was still called
    ``atom``'s after ``atom`` moved to ``siamese``)."""
    import json

    from ebmtrack.exports import SHIPPED_EXPORTS, shipped_export
    from ebmtrack.lite.params import BOX_MODES

    modes = "|".join(re.escape(mode) for mode in BOX_MODES)
    trackers = "|".join(re.escape(name) for name in SHIPPED_EXPORTS)
    pair = re.compile(rf"`({modes})`(?::| \()\s*`({trackers})`")
    actual = {
        name: json.loads((shipped_export(name) / "params.json").read_text())["box_mode"]
        for name in SHIPPED_EXPORTS
    }
    wrong, checked = [], 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for mode, tracker in pair.findall(text):
            checked += 1
            if actual[tracker] != mode:
                wrong.append(f"{page.relative_to(ROOT)}: `{mode}` as {tracker}'s, which is "
                             f"`{actual[tracker]}`")
    assert checked >= 3, checked
    assert not wrong, "\n".join(wrong)


def test_the_options_a_page_passes_the_default_runtime_are_its_own():
    """A call of ``load_tracker``, ``load_multi_tracker`` or an OpenCV-style class's ``create``
    written on a page without ``runtime="torch"``, for a tracker that ships an export, passes
    options that the default install's runtime takes (``create(search_size=256)`` was shown
    as an example of ``create``'s options, and the default install refuses it: the search size
    is the torch tracker's, ``ebmtrack[train]``)."""
    import ast

    import ebmtrack
    from ebmtrack.tracking.runtime import check_lite_options, resolve_runtime

    call = re.compile(r"\b(load_tracker|load_multi_tracker|(Tracker\w+)\.create)\(([^()]*)\)")
    wrong, checked = [], 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for function, cv_class, arguments in call.findall(text):
            try:
                parsed = ast.parse(f"f({arguments})", mode="eval").body
            except SyntaxError:
                continue
            options = {k.arg: k.value for k in parsed.keywords if k.arg is not None}
            positional = [a.value for a in parsed.args if isinstance(a, ast.Constant)]
            if cv_class:
                name = getattr(ebmtrack, cv_class).tracker_name
            elif parsed.args:
                if len(positional) != len(parsed.args) or not isinstance(positional[0], str):
                    continue
                name = positional[0]
            else:
                name = "atom"
            if "runtime" in options or resolve_runtime(name) != "lite":
                continue
            options = {k: v for k, v in options.items() if k not in ("threads", "color")}
            try:
                values = {k: ast.literal_eval(v) for k, v in options.items()}
            except ValueError:
                continue
            checked += 1
            try:
                check_lite_options(name, values)
            except ValueError as error:
                wrong.append(f"{page.relative_to(ROOT)}: {function}({arguments}): {error}")
    assert checked >= 5, checked
    assert not wrong, "\n".join(wrong)


def test_the_readme_is_one_screen_of_what_install_use_and_then_pointers():
    """The README opens with its two commands (the demo; the tests, which CI runs as written),
    then what they do, then ``## Use``; results and the docs table come after, within 80 lines
    (the detail belongs in docs/)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
    assert [body.strip() for _, body in blocks[:2]] == [
        "bash scripts/setup.sh && .venv/bin/ebmtrack demo",
        "bash scripts/setup.sh test && .venv/bin/ruff check . && .venv/bin/python -m pytest -q",
    ]
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Use", headings
    assert len(text.splitlines()) <= 80, len(text.splitlines())
