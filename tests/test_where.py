"""`viz.where`: a place in the user's code, named as the user knows it (#49)."""

from __future__ import annotations

from viz.source import load_module
from viz.where import YOUR_CODE, split_where, user_where


def test_a_file_is_named_as_the_user_gave_it() -> None:
    assert user_where("model.py", 4) == "model.py:4"
    assert user_where("../src/model.py", 12) == "../src/model.py:12"
    assert user_where("model.py", None) == "model.py"


def test_code_from_the_apps_editor_is_your_code() -> None:
    module = load_module("def f(x):\n    return x\n")
    code = module.f.__code__
    assert code.co_filename == YOUR_CODE
    assert user_where(code.co_filename, code.co_firstlineno) == "your code, line 1"


def test_code_loaded_from_a_file_keeps_the_name_it_was_given() -> None:
    module = load_module("\n\ndef g(x):\n    return x\n", file="project/model.py")
    assert user_where(module.g.__code__.co_filename, 3) == "project/model.py:3"


def test_every_where_reads_back_as_its_file_and_line() -> None:
    assert split_where("model.py:4") == ("model.py", 4)
    assert split_where("your code, line 4") == ("your code", 4)
    assert split_where("In [3], line 1") == ("In [3]", 1)
    assert split_where("model.py") == ("model.py", None)


def test_a_notebook_cell_is_named_as_ipython_names_it() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("pass", store_history=True)
        result = shell.run_cell("def h(x):\n    return x\n", store_history=True)
        assert result.success
        file = shell.user_ns["h"].__code__.co_filename
        assert user_where(file, 2) == f"In [{shell.execution_count - 1}], line 2"
        assert "ipykernel" not in user_where(file, 2) and ".py" not in user_where(file, 2)
    finally:
        InteractiveShell.clear_instance()
