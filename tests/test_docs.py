"""The docs describe the present: every registered tracker is listed, and no text in the
repository points at the development process instead of the code."""

import re
from pathlib import Path

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


def test_readme_tracker_table_matches_the_tracking_page():
    """Each tracker of the README's table has the AUC of its row in the newest 13-sequence
    table of docs/results/tracking.md that lists it (the sections are dated, newest first)."""
    readme = _section((ROOT / "README.md").read_text(encoding="utf-8"), "Results")
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

    page = {}
    for table in reversed(tables):  # newer sections overwrite older rows
        page.update(rows(table))
    checked = 0
    for label, auc in rows(readme):
        if label in page:
            assert page[label] == auc, f"README {label}: {auc}, tracking.md: {page[label]}"
            checked += 1
    assert checked >= 4, f"only {checked} README rows found in tracking.md's table"


def test_the_demo_score_is_the_same_on_every_page():
    # The int8 backbone's demo AUC depends on the CPU: the README states the one measured (and
    # on which CPU), docs/demo.md shows that run's output and docs/guide.md names the same.
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
