"""The README and the guides in docs/: every relative link goes to a file of this
checkout, and every #anchor to a heading of the page it names (as GitHub makes a
heading's anchor: lower case, punctuation dropped, spaces as hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(page: Path) -> set[str]:
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"(#{1,6}) (.*)", line)
        if m and not in_code:
            text = re.sub(r"[^\w\- ]", "", m.group(2).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def test_every_link_of_the_readme_and_the_guides_resolves():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code is not links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
    assert len(PAGES) >= 8  # the README and its guides


def test_the_readme_keeps_its_two_commands_and_links_every_guide():
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/batchbench demo" in readme and ".venv/bin/python -m pytest" in readme
    for guide in (ROOT / "docs").glob("*.md"):
        assert f"docs/{guide.name}" in readme, guide.name
