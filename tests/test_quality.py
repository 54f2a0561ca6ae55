"""The linter, the formatter and the type checker, as part of the test command.

They run as tests so the one test command checks everything and, on several workers,
the type checker (the slowest single check) runs beside the other tests instead of
after them; ``conftest.py`` starts these first.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import REPO


def _tool(name: str) -> str:
    """The tool installed beside this Python (the venv's), else the one on PATH."""
    return shutil.which(name, path=str(Path(sys.executable).parent)) or name


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        # the package strict, the tests plain, in one run (pyproject.toml)
        ["mypy"],
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_the_code_passes(command):
    proc = subprocess.run(
        [_tool(command[0]), *command[1:]], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_install_line_of_the_readme_names_this_project():
    """#63.1: `pip install 'batchbench[bucket]'` resolves to the index's unrelated
    `batchbench` package. Every pip line of the README and its guides installs this
    checkout (`.`, a path, a wheel of ours) or the project by its name on the index (its
    pyproject's name)."""
    import re

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    root = Path(__file__).resolve().parents[1]
    name = tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"]
    text = "\n".join(p.read_text() for p in [root / "README.md", *(root / "docs").glob("*.md")])
    installs = re.findall(r"pip install (?:-q )?(?:-e )?'?([^'\s`]+)", text)
    assert installs
    for target in installs:
        if target.startswith((".", "/", "-")) or target.endswith(".whl[all]"):
            continue  # this checkout, a path, a wheel built here
        assert target.split("[")[0] in (name, name.replace("-", "_")), target


def test_every_package_module_is_under_the_house_limit():
    """docs/CONTRIBUTING.md: every package module 400 lines at most (split by meaning)."""
    package = Path(__file__).resolve().parents[1] / "batchbench"
    over = {
        str(p.relative_to(package)): n
        for p in package.rglob("*.py")
        if (n := p.read_text().count("\n")) > 400
    }
    assert not over, over
