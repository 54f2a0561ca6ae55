"""What every command shares: one-line errors, option types, the bundled sample."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from .. import _failpoints
from ..clock import SYSTEM, Clock
from ..errors import BatchbenchError, InvariantError, StorageError
from .folders import complete_runs, jobs_folder, with_origin

F = TypeVar("F", bound=Callable[..., Any])

# The bundled sample ships inside the package, so a wheel install can run the demo.
SAMPLE_DATASET = Path(str(resources.files("batchbench").joinpath("sample")))


TRACEBACK_VARIABLE = "BATCHBENCH_TRACEBACK"


# Options that take several values after one flag (`--labels a.csv b.csv`), as the
# README and `--help` show them: each value that follows is given the flag again.
GREEDY = ("--labels",)
_LABEL_SUFFIXES = (".csv", ".json", ".jsonl", ".tsv")


def spread(args: list[str]) -> list[str]:
    """``--labels a.csv b.csv`` → ``--labels a.csv --labels b.csv``: what follows a greedy
    option and looks like its value (a file there, or a labels file's name) is one."""
    out: list[str] = []
    taking: str | None = None
    expect_value = False
    for arg in args:
        if expect_value:
            out.append(arg)
            expect_value = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in GREEDY:
            out.append(arg)
            taking, expect_value = flag, "=" not in arg
            continue
        looks = not arg.startswith("-") and (
            os.path.exists(arg) or arg.lower().endswith(_LABEL_SUFFIXES)
        )
        if taking is not None and looks:
            out += [taking, arg]
            continue
        taking = None
        out.append(arg)
    return out


def reflow(text: str | None) -> str | None:
    """A docstring's paragraphs each on one line: the help wraps them to the terminal
    (typer keeps a later paragraph's line breaks, cutting sentences mid-line)."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


class Command(TyperCommand):
    """A command whose help shows no ``<bool>`` beside ``--help``, whose paragraphs wrap
    to the terminal (:func:`reflow`), whose greedy options take several values
    (:func:`spread`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)
        for param in self.params:  # an argument's metavar says it all: no <list[str]>
            if isinstance(param, TyperArgument):
                param.display_type_rich = lambda ctx: None  # type: ignore[method-assign]

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] RUN...``: each argument as its metavar writes it (typer would
        print ``{RUN...}...``)."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                more = "..." if param.nargs != 1 else ""
                pieces.append(param.metavar or f"{(param.name or '').upper()}{more}")
        return pieces

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        parsed: list[str] = super().parse_args(ctx, spread(list(args)))
        return parsed

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


def _completing() -> bool:
    """Whether the shell asks for completions (click's ``_<PROG>_COMPLETE`` variable)."""
    return any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)


def _asking_about_itself(args: list[str]) -> bool:
    """Whether the command line asks for help or the version, which need no project."""
    return any(a in ("--help", "-h", "--version") for a in args)


class Group(TyperGroup):
    """The command group, likewise (its completion flags too); its commands' defaults
    are the project file's where it gives one (:mod:`.project`)."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        from . import completion, project

        try:  # a completion flag, with its shell named or not: before any project file
            completion.take(info_name or "batchbench", args)
        except OSError as exc:
            raise _unwritable(exc) from None
        if "default_map" not in extra:
            try:
                found = project.find()
                if found is not None:
                    extra["default_map"] = project.default_map(project.load(found), self.commands)
            except BatchbenchError as exc:
                if _completing():  # a TAB: the shell's line is no place for an error
                    pass
                elif _asking_about_itself(args):  # --help, --version: answered all the same
                    typer.echo(f"note: {exc} (not read for this)", err=True)
                else:
                    typer.echo(f"error: {exc}", err=True)
                    raise typer.Exit(exc.exit_code) from None
        try:
            return super().make_context(info_name, args, parent, **extra)
        except OSError as exc:  # --install-completion: a shell file it cannot write
            raise _unwritable(exc) from None

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            if param.name in ("install_completion", "show_completion"):
                param.metavar = ""
        return list(params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


# What Ctrl-C leaves to do, for the commands that leave something (a report, a status or
# an export is written whole or not at all: nothing to resume, #63.9).
AFTER_INTERRUPT = {
    "run": "; run the same command to resume",
    "demo": "; run the same command to resume",
    "move": "; run the same command to finish the move",
}


def _unwritable(exc: OSError) -> typer.Exit:
    """A shell file --install-completion cannot write, said in one line."""
    where = exc.filename or "a file"
    typer.echo(f"error: cannot write {where}: {exc.strerror or exc}", err=True)
    return typer.Exit(StorageError.exit_code)


def finite(value: object, missing: list[str] | None = None, where: str = "") -> object:
    """``value`` with every figure that is no number (NaN, ±∞) as None (JSON's null),
    each such place noted in ``missing``."""
    if isinstance(value, float) and not math.isfinite(value):
        if missing is not None:
            missing.append(where)
        return None
    if isinstance(value, dict):
        return {
            k: finite(v, missing, f"{where}.{k}" if where else str(k)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [finite(v, missing, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def strict_json(value: object) -> str:
    """What every --json prints: strict JSON (a figure that cannot be given is null)."""
    return json.dumps(finite(value), indent=2, allow_nan=False)


def clock_of(ctx: typer.Context | None) -> Clock:
    """The clock the caller gave the command (tests give the emulator's fake one through
    ``obj={"clock": ...}``), else real time."""
    obj = ctx.obj if ctx is not None else None
    found = obj.get("clock") if isinstance(obj, dict) else None
    return found if found is not None else SYSTEM


def warn(line: str) -> None:
    """The reporter for warnings: stderr, one line."""
    typer.echo(line, err=True)


def _one_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A library's warning (google-genai on a value it does not know, numpy on an empty
    slice) as one line on stderr, without the library's file and source line."""
    text = str(message).splitlines()[0] if str(message) else category.__name__
    typer.echo(f"warning: {text}", err=True)


def friendly(fn: F) -> F:
    """Turn a BatchbenchError into one line on stderr and a non-zero exit; anything
    unforeseen into one "internal error" line (exit 70), with its traceback only when
    ``BATCHBENCH_TRACEBACK=1``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ..storage import close_all, refused  # a bucket's runs: written back, folders gone

        try:
            with warnings.catch_warnings():
                warnings.showwarning = _one_line
                try:
                    refused()  # a jobs folder the option could not take
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    with contextlib.suppress(Exception):  # the command's own error is said
                        close_all(write_back=not isinstance(exc, _failpoints.Crash))
                    raise
                close_all()
                return result
        except BrokenPipeError:
            # The reader went away (`batchbench demo | head`): not an error. Point
            # stdout at /dev/null so no later write or the last flush complains.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except BatchbenchError as exc:
            typer.echo(f"error: {with_origin(str(exc))}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # file work no module turned into a StorageError
            typer.echo(f"error: {exc.filename or 'a file'}: {exc.strerror or exc}", err=True)
            raise typer.Exit(StorageError.exit_code) from None
        except KeyboardInterrupt:
            after = AFTER_INTERRUPT.get(fn.__name__, "")
            typer.echo(f"interrupted: nothing is lost{after}", err=True)
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # the last resort: a bug, said in one line
            if os.environ.get(TRACEBACK_VARIABLE) == "1":
                traceback.print_exc()
            what = str(exc) if isinstance(exc, InvariantError) else f"{type(exc).__name__}: {exc}"
            typer.echo(
                f"internal error (a bug in batchbench, please report it): {what}"
                f" (set {TRACEBACK_VARIABLE}=1 for the traceback)",
                err=True,
            )
            raise typer.Exit(InvariantError.exit_code) from None

    return wrapper  # type: ignore[return-value]


DatasetOpt = Annotated[
    Path,
    typer.Option(
        "--dataset",
        metavar="DIR",
        envvar="BATCHBENCH_DATASET",
        help="BedsideBench checkout (registry.json at its root; or BATCHBENCH_DATASET).",
    ),
]
# Which cases, which runs: one declaration each, for `run` and every other command (the
# "Selection" panel groups them in `run --help`, beside its many other options).
SELECTION = "Selection"
SmokeOpt = Annotated[
    bool,
    typer.Option(
        "--smoke",
        metavar="",
        rich_help_panel=SELECTION,
        help="Only the first case of each benchmark.",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        metavar="N",
        rich_help_panel=SELECTION,
        help="Keep the first N cases of the selection.",
    ),
]


JobsDirOpt = Annotated[
    Path,
    typer.Option(
        "--jobs-dir",
        metavar="DIR_OR_URI",
        envvar="BATCHBENCH_JOBS_DIR",
        rich_help_panel=SELECTION,
        parser=jobs_folder,
        help="Folder holding one directory per run, or a bucket a team shares"
        " (s3://BUCKET/PREFIX, gs://…, az://…); or BATCHBENCH_JOBS_DIR, or `jobs-dir` in"
        " the project file (batchbench.toml, or \\[tool.batchbench] in pyproject.toml).",
    ),
]


# Options the commands that read runs or results files share.
SourcesArg = Annotated[
    list[str],
    typer.Argument(
        metavar="RUN_OR_RESULTS...", help="Runs or files.", autocompletion=complete_runs
    ),
]
RunArg = Annotated[
    str, typer.Argument(metavar="RUN", help="Run name.", autocompletion=complete_runs)
]
RunsArg = Annotated[
    list[str], typer.Argument(metavar="RUN...", help="Run names.", autocompletion=complete_runs)
]
FilesDatasetOpt = Annotated[
    Path | None,
    typer.Option(help="The dataset of results files (reference runner's too).", metavar="DIR"),
]
LabelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--label",
        metavar="NAME",
        help="A name for each run or file, in order (repeatable), e.g. for two files"
        " both called results.jsonl.",
    ),
]
MarginOpt = Annotated[
    float | None,
    typer.Option(
        metavar="M",
        help="Non-inferiority margin: say, per benchmark and overall, whether each run is"
        " shown to be no worse than the baseline by more than M (95% CI low above -M).",
    ),
]
AllowPartialOpt = Annotated[
    bool,
    typer.Option(
        "--allow-partial",
        metavar="",
        help="Compare runs that share under 90% of their scored cases (a smoke run against"
        " a full one).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON.")]

DatasetFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--dataset-format",
        metavar="FORMAT",
        rich_help_panel=SELECTION,
        help="bedside-bench (a checkout: a folder) or healthbench (a HealthBench JSONL,"
        " simple-evals' shape, graded as simple-evals grades it); default: what --dataset is.",
    ),
]

PhysicianCompletionsOpt = Annotated[
    bool,
    typer.Option(
        "--physician-completions",
        metavar="",
        rich_help_panel="Models",
        help="HealthBench: grade the dataset's ideal completions (the physicians') instead of"
        " a model's answers, as simple-evals' --run_mode=physician_completions does (the"
        " examples that have one; no answer is bought; no --answer-model).",
    ),
]
