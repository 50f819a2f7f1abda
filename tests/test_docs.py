"""The docs cannot drift from the code: docs/contracts.md documents every field of
every dataclass behind a public JSON contract, under its own heading."""

from __future__ import annotations

import re

import pytest
from conftest import REPO
from contracts import CONTRACTS, classes, public_fields

PAGE = (REPO / "docs" / "contracts.md").read_text()


def section(name: str) -> str:
    match = re.search(rf"^### {name}\n(.*?)(?=^##|\Z)", PAGE, re.S | re.M)
    assert match, f"docs/contracts.md has no section for {name}: python tests/contracts.py"
    return match.group(1)


@pytest.mark.parametrize(
    "cls", [c for _, _, roots in CONTRACTS for c in classes(roots)], ids=lambda c: c.__name__
)
def test_the_contracts_page_names_every_field(cls: type):
    text = section(cls.__name__)
    missing = [f.name for f in public_fields(cls) if f"| `{f.name}` |" not in text]
    assert not missing, f"{cls.__name__} lacks {missing}: python tests/contracts.py"


def test_every_doc_link_in_the_readme_opens_a_file():
    readme = (REPO / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]+)", readme):
        assert (REPO / target).is_file(), target
