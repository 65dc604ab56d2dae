"""`kag init`: write a configuration, a benchmark, a prompt and a five-question datasets file."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from kag.commands._help import kag_command
from kag.commands._options import Quiet, Verbose
from kag.errors import UsageError

HELP = """Write a working project into DIR (default: the current folder): config.toml (the
model server), benchmark.toml (one setup), prompts/mcq.md and a five-question datasets.json.

No existing file is replaced (exit 2 naming it), and the files are written all or none. The
next commands to run are printed.
"""

EXAMPLES = """Examples:

\b
  kag init my-run --provider ollama --model qwen2.5:0.5b
  kag init my-run --provider llama-cpp --url http://127.0.0.1:8080/v1
  kag init my-run --provider openai --model gpt-4o-mini
"""

PROVIDERS = ("ollama", "openai", "llama-cpp")


def init(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="Folder to write into (created when missing).")
    ] = Path("."),
    provider: Annotated[
        str,
        typer.Option(
            "--provider",
            metavar="PROVIDER",
            help="ollama, openai or llama-cpp (an OpenAI-compatible server).",
        ),
    ] = "ollama",
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            metavar="URL",
            help="The server's URL (default: the provider's usual one).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="MODEL", help="The model name at the server.", show_default=False),
    ] = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    from kag.starter import DEFAULTS, StarterProvider, write_starter

    try:
        chosen = StarterProvider(provider.strip().lower())
    except ValueError:
        raise UsageError(f"--provider must be one of {', '.join(PROVIDERS)} (got {provider!r})") from None
    written = write_starter(folder, chosen, url, model)
    out = sys.stdout
    out.write("".join(f"wrote {path}\n" for path in written))
    here = [] if folder.resolve() == Path.cwd().resolve() else [f"cd {shlex.quote(_cd_path(folder))}"]
    key = DEFAULTS[chosen].key
    if chosen is StarterProvider.OPENAI and key:
        here.append(f"export {key}=...   # your API key")
    steps = [
        *here,
        "kag benchmark -d datasets.json -b benchmark.toml -o results --dry-run   # what would run",
        "kag benchmark -d datasets.json -b benchmark.toml -o results             # run it",
        "kag stats -d datasets.json -r results --extract letter                   # grade it",
    ]
    out.write("\nNext:\n" + "".join(f"  {step}\n" for step in steps))


def _cd_path(folder: Path) -> str:
    """``folder`` as ``cd`` takes it: a name starting with ``-`` would be read as an option
    (``cd -`` goes back to the previous folder), so it is written ``./-name``."""
    text = str(folder)
    return f"./{text}" if text.startswith("-") else text


def register(app: typer.Typer) -> None:
    kag_command(
        app, "init", "Write a starter project: config, benchmark, prompt, datasets.", EXAMPLES, help=HELP
    )(init)
