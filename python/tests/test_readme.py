"""The README's Python example runs and prints what the README says."""
import contextlib
import io
import os
import re

import pytest


def readme():
    src = os.environ.get("FKV_SOURCE_DIR")
    path = os.path.join(src, "README.md") if src else None
    if not path or not os.path.exists(path):
        pytest.skip("README.md not found (FKV_SOURCE_DIR unset)")
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_readme_python_example():
    text = readme()
    sec = text[text.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
    want = re.search(r"It prints\n\n```text\n(.*?)```", sec, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12, "the README's example should stay about ten lines"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == want
