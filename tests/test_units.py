"""viz.units' words for counts: one plural helper, lists that say how many they cut,
and text sorted with its numbers as numbers; the app's pages write no "(s)"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from viz.units import listed, natural, plural

ROOT = Path(__file__).resolve().parent.parent


def test_a_count_of_one_is_singular_and_any_other_plural() -> None:
    assert plural(1, "line") == "1 line"
    assert plural(0, "line") == "0 lines"
    assert plural(1992, "kernel") == "1,992 kernels"
    assert plural(3, "earlier miss", "earlier misses") == "3 earlier misses"


def test_a_cut_list_says_how_many_more() -> None:
    assert listed(["a", "b", "c"], 3) == "a, b, c"
    assert listed(["a", "b", "c", "d", "e"], 2) == "a, b and 3 more"


def test_numbers_in_text_sort_as_numbers() -> None:
    names = ["layers[10]", "layers[2]", "layers[0]", "layers[11]", "embed"]
    assert sorted(names, key=natural) == [
        "embed",
        "layers[0]",
        "layers[2]",
        "layers[10]",
        "layers[11]",
    ]


def texts(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module (an f-string's literal parts too), with lines."""
    tree = ast.parse(path.read_text())
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_a_word_takes_the_article_it_is_read_aloud_with() -> None:
    from viz.units import a_or_an

    said = [a_or_an(w) for w in ("equinox", "custom_jvp", "f32[]", "bf16[2]", "MLP", "PRNGKey")]
    assert said == ["an equinox", "a custom_jvp", "an f32[]", "a bf16[2]", "an MLP", "a PRNGKey"]


def test_the_app_writes_no_parenthesised_plural() -> None:
    """'290 kernel(s)': the app's text goes through `plural` instead."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("pages", "ui")
        for path in sorted((ROOT / folder).glob("*.py"))
        if path.name != "recordings.py"  # the recorder's page: issue #62's other part
        for n, text in texts(path)
        if re.search(r"[a-z]\(s\)", text)
    ]
    assert not found, found
