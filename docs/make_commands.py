"""Write docs/commands.md from brainbot's argparse definitions (brainbot/cli_args.py, through
cli.build_parser): every command with its one-line help, its usage, every argument and
option with its help, and the example its --help ends with.

    python docs/make_commands.py [--out docs/commands.md]     (or: make docs)

tests/test_docs.py fails when docs/commands.md differs from what this prints, so an option
added to the parser is documented by running `make docs`, and only so. The usage lines are
built here, not by argparse's formatter, whose line breaks follow the terminal's width and
whose layout changes between Python versions.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "commands.md"

HEADER = """\
# brainbot's commands

Every command, argument and option of `brainbot`, with an example of each command.
Generated from the argparse definitions (`brainbot/cli_args.py`) by `make docs`
(`python docs/make_commands.py`); `tests/test_docs.py` fails when this file is not what
they say now. Edit the parser, not this file.

`brainbot --help` lists the commands and `brainbot COMMAND --help` shows what is below.
`brainbot --version` prints brainbot's version, Python's, the embedding model and the
search kernel this CPU runs. `brainbot completion bash|zsh` prints a completion script
made from the same definitions.
"""


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _value(action: argparse.Action) -> str:
    """What follows an option or stands for a positional, with its repetition."""
    if action.nargs == 0:
        return ""
    m = _metavar(action)
    return {"*": f"[{m} ...]", "+": f"{m} [{m} ...]", "?": f"[{m}]"}.get(action.nargs, m)


def _names(action: argparse.Action) -> str:
    value = _value(action)
    if not action.option_strings:
        return value
    flags = ", ".join(action.option_strings)
    return f"{flags} {value}" if value else flags


def usage(name: str, parser: argparse.ArgumentParser) -> str:
    """`brainbot NAME [-h] [--db FILE|URL] ... TEXT`: options first, as argparse writes it;
    a mutually exclusive group as [a | b]."""
    groups = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    parts, done = [f"brainbot {name}", "[-h]"], set()
    for action in [a for a in parser._actions if a.option_strings] + \
                  [a for a in parser._actions if not a.option_strings]:
        if isinstance(action, argparse._HelpAction) or id(action) in done:
            continue
        group = groups.get(id(action))
        members = group._group_actions if group else [action]
        done |= {id(a) for a in members}
        words = [_word(a) for a in members]
        joined = " | ".join(words)
        if group and not group.required:
            parts.append(f"[{joined}]")
        elif not action.option_strings or action.required:
            parts.append(joined)
        else:
            parts.append(f"[{joined}]")
    return _wrapped(parts, len(f"brainbot {name} "))


def _wrapped(parts: list[str], indent: int, width: int = 88) -> str:
    """``parts`` joined by spaces, in lines of at most ``width`` (a part is never cut),
    each line after the first indented under the first part after the command."""
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 1 + len(part) > width and lines[-1].strip():
            lines.append(" " * indent + part)
        else:
            lines[-1] += " " + part
    return "\n".join(lines)


def _word(action: argparse.Action) -> str:
    if not action.option_strings:
        return _value(action)
    value = _value(action)
    return f"{action.option_strings[0]} {value}" if value else action.option_strings[0]


def examples(epilog: str) -> list[str]:
    """The commands of an epilog's "Example: A   or   B": one a line; a parenthesised
    remark after a command becomes its shell comment."""
    text = re.sub(r"^Example:\s*", "", epilog.strip())
    out = []
    for part in re.split(r"\s{2,}or\s{2,}", text):
        m = re.match(r"^(.*?)\s+\((.*)\)$", part.strip())
        out.append(f"{m.group(1)}  # {m.group(2)}" if m else part.strip())
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def command_section(name: str, parser: argparse.ArgumentParser, help_: str) -> str:
    rows = [f"| `{_cell(_names(a))}` | {_cell(a.help or '')} |" for a in parser._actions
            if not isinstance(a, argparse._HelpAction)]
    lines = [f"## `brainbot {name}`", "", help_[:1].upper() + help_[1:] + ".", "",
             "```text", usage(name, parser), "```", ""]
    if rows:
        lines += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    lines += ["Example:", "", "```console"]
    lines += [f"$ {e}" for e in examples(parser.epilog or "")]
    lines += ["```", ""]
    return "\n".join(lines)


def build() -> str:
    sys.path.insert(0, str(REPO))
    from brainbot.cli import build_parser
    from brainbot.shell.completion import subcommands

    commands = subcommands(build_parser())
    index = ["| command | what it does |", "|---|---|"]
    index += [f"| [`{name}`](#brainbot-{name}) | {_cell(h)} |" for name, _, h in commands]
    sections = [command_section(name, p, h) for name, p, h in commands]
    return "\n".join([HEADER, *index, "", *sections]).rstrip("\n") + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.write_text(build(), encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    main()
