"""Every relative link of the README and docs/ names a file of the checkout: pages moved or renamed
(the README's internals went to docs/) leave no link that a reader follows to nothing."""

from __future__ import annotations

import re

from jobs.config import REPO_ROOT

# [text](target) and ![alt](target); a target ends at the first space or closing parenthesis.
LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md")))


def relative_targets(text: str) -> list[str]:
    targets = (target.split("#")[0] for target in LINK.findall(text))
    return [target for target in targets if target and "://" not in target and not target.startswith("mailto:")]


def test_every_relative_link_names_a_file_that_exists():
    broken = [
        f"{page.relative_to(REPO_ROOT)}: {target}"
        for page in PAGES
        for target in relative_targets(page.read_text())
        if not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_link_pattern_finds_links_and_images_but_not_web_addresses():
    text = "[a](docs/a.md#part) ![b](docs/images/b.png) [c](https://example.com/c) [d](#anchor)"
    assert relative_targets(text) == ["docs/a.md", "docs/images/b.png"]
