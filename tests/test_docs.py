"""The docs describe the present: every registered tracker is listed, and no text in the
repository points at the development process instead of the code."""

import re
from pathlib import Path

from ebmtrack.tracking.registry import tracker_names

ROOT = Path(__file__).resolve().parents[1]
TEXT_FOLDERS = ("docs", "src", "tests", "benchmarks", "scripts")


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
