"""The docs cannot drift from the code: docs/contracts.md documents every field of
every dataclass behind a public JSON contract, under its own heading."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

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


# --------------------------------------------------------------------------- examples (#62)
# Every fenced block of the README and docs/ is `bash` or `python` (an example, run here)
# or `text` (printed output, a synopsis, a diagram). A bash line `jitscope ...` runs as
# `python -m viz ...` in a temporary folder (the clone's samples/ and tests/ linked in,
# JITSCOPE_HOME its own); a doc's python blocks run in order as one notebook's cells,
# through IPython, with the samples' functions below bound. Any other line must be in
# SKIP with the reason it cannot run here: a new example is run or listed, never missed.

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
LANGUAGES = ("bash", "python", "text")
SAMPLE_NAMES = {"arange_static": ["f"], "elementwise_chain": ["chain"], "mlp": ["mlp", "params"]}

USER_FILE = "runs the reader's own program (train.py), which this clone has not"
JOB = (
    "the two-process job (jax.distributed on a fixed port; tests/test_job_cli.py runs "
    "this program as a job)"
)
SUITE = "runs the whole test suite (this test is part of it)"
BENCH = "a benchmark or a check (minutes; docs/performance.md gives its numbers)"
SKIP = {
    "pip install -e . -c constraints.txt && streamlit run app.py": "installs, then serves",
    "pip install -r requirements-dev.txt -c constraints.txt && python -m pytest -q": SUITE,
    "jitscope record -- train.py": USER_FILE,
    "jitscope job": "needs a job's recordings in history (docs/recording.md runs one)",
    'jitscope analyze model.py::loss --args "params, f32[32,784]" --json out.json '
    "--html out.html": USER_FILE.replace("train.py", "model.py"),
    "jitscope app": "serves until stopped (tests/test_install.py starts it)",
    "mkdir -p out": JOB,
    "for i in 0 1; do": JOB,
    "jitscope record --json 'out/p{process}.json' -- tests/programs/data_parallel.py "
    "--coordinator localhost:7531 --processes 2 --process $i --extra-on 1 --batch-on 1=12 &": JOB,
    "done; wait": JOB,
    "srun --nodes 4 --ntasks-per-node 1 jitscope record --json 'out/p{process}.json' -- "
    "train.py": "needs a Slurm cluster",
    "jitscope job out/p*.json": JOB,
    "python -m pytest -q": SUITE,
    'python -m pytest -q -m "not slow"': SUITE,
    'python -m pytest -q -m "not browser"': SUITE,
    "ruff check . && ruff format --check .": "lints the clone (tests/test_house_rules.py "
    "keeps its rules)",
    "bash bench/gpu_check.sh": BENCH,
}
SKIP_PREFIXES = {"python bench/": BENCH}


@dataclass(frozen=True)
class Block:
    doc: str  # README.md, docs/cli.md
    line: int  # of its opening fence
    lang: str
    text: str


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        page = path.read_text()
        for m in FENCE.finditer(page):
            line = page.count("\n", 0, m.start()) + 1
            text = textwrap.dedent(m.group(3))
            found.append(Block(str(path.relative_to(REPO)), line, m.group(2), text))
    return found


def commands(block: Block) -> list[str]:
    """A bash block's command lines, continuations joined, comments and blanks dropped."""
    joined = block.text.replace("\\\n", " ")
    lines = (re.sub(r"(^|\s+)#(\s.*)?$", "", line) for line in joined.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def skip_reason(command: str) -> str | None:
    if command in SKIP:
        return SKIP[command]
    return next((r for p, r in SKIP_PREFIXES.items() if command.startswith(p)), None)


BASH = [b for b in blocks() if b.lang == "bash"]
PYTHON_DOCS = sorted({b.doc for b in blocks() if b.lang == "python"})


def test_every_fenced_block_says_what_it_is():
    unmarked = [f"{b.doc}:{b.line} ```{b.lang}" for b in blocks() if b.lang not in LANGUAGES]
    assert not unmarked, f"mark each block bash, python (run here) or text: {unmarked}"


def test_every_command_example_is_run_or_skipped_with_a_reason():
    commands_seen = [c for b in BASH for c in commands(b)]
    unlisted = [c for c in commands_seen if not c.startswith("jitscope ") and not skip_reason(c)]
    assert not unlisted, f"run these here or add them to SKIP with a reason: {unlisted}"
    stale = set(SKIP) - set(commands_seen)
    assert not stale, f"SKIP lists examples the docs no longer have: {stale}"


def block_id(block: Block) -> str:
    return f"{block.doc}:{block.line}"


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BASH if any(
    c.startswith("jitscope ") and not skip_reason(c) for c in commands(b)
)], ids=block_id)  # fmt: skip
def test_a_command_example_runs(block: Block, tmp_path: Path):
    """Its commands in order, in one folder and one history (`diff 1 2` after two runs)."""
    for name in ("samples", "tests"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PYTHONPATH": str(REPO), "JITSCOPE_HOME": str(tmp_path / "home")}
    for command in commands(block):
        if skip_reason(command):
            continue
        argv = [sys.executable, "-m", "viz", *shlex.split(command)[1:]]
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        assert not re.search(r"^error \[", done.stdout, re.M), f"{command}\n{done.stdout}"


RUN_CELLS = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
import viz.pipeline
from viz.samples import get_sample
from viz.source import load_module

analyze = viz.pipeline.analyze  # viz.analyze, viz.show and %jitscope call it


def succeeds(*args, **kwargs):
    report = analyze(*args, **kwargs)
    if report.error:  # a result, not an exception: the cell would pass
        raise AssertionError(f"the analysis failed: {report.error.to_dict()}")
    return report


viz.pipeline.analyze = succeeds
shell = InteractiveShell.instance()
for name, names in json.loads(sys.argv[1]).items():
    sample = get_sample(name)
    module = load_module(sample.code, str(sample.path.parent), str(sample.path))
    shell.user_ns.update({n: getattr(module, n) for n in names})
for cell in json.loads(sys.stdin.read()):
    if not shell.run_cell(cell).success:
        sys.exit(f"this cell failed:\\n{cell}")
"""


@pytest.mark.slow
@pytest.mark.parametrize("doc", PYTHON_DOCS)
def test_a_docs_python_examples_run_as_a_notebooks_cells(doc: str, tmp_path: Path):
    cells = [b.text for b in blocks() if b.doc == doc and b.lang == "python"]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "JITSCOPE_HOME": str(tmp_path / "home"),
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",  # the mesh example
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_CELLS, json.dumps(SAMPLE_NAMES)],
        input=json.dumps(cells),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"


def test_the_gpu_install_line_is_one_line_everywhere():
    line = "pip install -e . -r requirements-gpu.txt -c constraints.txt"
    assert f"`{line}`" in (REPO / "docs" / "guide.md").read_text()
    assert f"#   {line}\n" in (REPO / "requirements-gpu.txt").read_text()


def test_the_readme_says_what_its_test_command_runs_and_how_to_skip_the_browser():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert '-m "not browser"' in readme and "JITSCOPE_CHROMIUM=none" in readme
    assert re.search(r"about [\d,]+ tests", readme)
