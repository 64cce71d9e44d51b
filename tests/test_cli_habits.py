"""A person's habits at the command line (issue 35): `brainbot --version`, an example in
every command's --help, every option explained, and shell completion for bash and zsh
generated from the parser, run in the shells themselves."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from brainbot.cli import build_parser, main
from brainbot.shell.completion import commands, subcommands


def brainbot(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=60)


# -- --version -------------------------------------------------------------------------
def test_version_names_brainbot_python_model_and_kernel():
    from brainbot import __version__
    from brainbot.kernel.native import backend

    run = brainbot("-m", "brainbot", "--version")
    assert run.returncode == 0 and run.stderr == ""
    line = run.stdout.strip()
    assert line.startswith(f"brainbot {__version__} (Python ")
    assert "model sentence-transformers/all-MiniLM-L6-v2" in line
    assert line.endswith(f"C kernel {backend().removeprefix('c/')}")


def test_version_follows_brainbot_simd():
    run = brainbot("-m", "brainbot", "--version", env={"BRAINBOT_SIMD": "scalar"})
    assert run.stdout.strip().endswith("C kernel scalar")


def test_version_loads_neither_numpy_nor_the_model():
    """-X importtime lists every module imported: --version stays instant."""
    run = brainbot("-X", "importtime", "-m", "brainbot", "--version")
    imported = {line.split("|")[-1].strip() for line in run.stderr.splitlines()
                if line.startswith("import time:")}
    assert "brainbot.model.records" in imported  # what it does read
    heavy = {"numpy", "onnxruntime", "tokenizers", "anthropic", "brainbot.kernel.native",
             "brainbot.model.embed", "sqlite3"}
    assert not imported & heavy, imported & heavy


def test_help_does_not_build_the_version_line():
    run = brainbot("-X", "importtime", "-m", "brainbot", "--help")
    assert run.returncode == 0 and "--version" in run.stdout
    assert "brainbot.model.files" not in run.stderr and "brainbot._kernel" not in run.stderr


# -- --help ----------------------------------------------------------------------------
def test_every_command_has_an_example():
    for name, parser, help_ in subcommands(build_parser()):
        assert help_, f"`brainbot {name}` has no one-line help"
        epilog = parser.epilog or ""
        assert epilog.startswith("Example: ") and f"brainbot {name}" in epilog, \
            f"`brainbot {name} --help` has no example of `brainbot {name}`: {epilog!r}"


def test_every_option_and_argument_is_explained():
    for name, parser, _ in subcommands(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            what = "/".join(action.option_strings) or action.dest
            assert action.help, f"`brainbot {name} {what}` has no help text"


def test_the_example_shows_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    assert "Example: brainbot query" in capsys.readouterr().out


# -- completion ------------------------------------------------------------------------
def script(shell: str, capsys) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(script_text: str, line: str, cwd=REPO) -> list[str]:
    """What bash offers for ``line`` (a trailing space: a new, empty word), as a TAB
    there would: the script's function called with COMP_WORDS and COMP_CWORD set."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    program = (f"{script_text}\nCOMP_WORDS=({' '.join(_bash_quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\n_brainbot\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    run = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True,
                         text=True, cwd=cwd, timeout=30)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    return [w for w in run.stdout.splitlines() if w]


def _bash_quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.fixture(scope="module")
def bash_script():
    if shutil.which("bash") is None:
        pytest.skip("bash not found")
    from brainbot.shell.completion import bash

    return bash(build_parser())


def test_bash_script_is_valid(bash_script, tmp_path):
    path = tmp_path / "brainbot.bash"
    path.write_text(bash_script)
    run = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_bash_completes_commands_options_and_choices(bash_script):
    assert complete(bash_script, "brainbot q") == ["query"]
    assert complete(bash_script, "brainbot query --mo") == ["--mode"]
    assert complete(bash_script, "brainbot query 'feed' --mode ") == ["bm25", "vector",
                                                                       "hybrid"]
    assert complete(bash_script, "brainbot index --precision i") == ["int8"]
    assert complete(bash_script, "brainbot model ") == ["pull", "export", "info"]
    assert complete(bash_script, "brainbot --ver") == ["--version"]
    assert complete(bash_script, "brainbot completion ") == ["bash", "zsh"]
    assert complete(bash_script, "brainbot query -k ") == []  # a number: nothing to offer
    assert set(complete(bash_script, "brainbot ")) == {
        c.name for c in commands(build_parser())} | {"--help", "--version"}


def test_bash_completes_file_names_where_a_command_takes_a_path(bash_script, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes.db").write_text("")
    assert complete(bash_script, "brainbot index no", tmp_path) == ["notes", "notes.db"]
    assert complete(bash_script, "brainbot query x --db notes.d", tmp_path) == ["notes.db"]
    assert complete(bash_script, "brainbot chunks --jsonl no", tmp_path) == ["notes",
                                                                             "notes.db"]
    assert complete(bash_script, "brainbot query no", tmp_path) == []  # the query is text


def test_every_option_of_every_command_is_completed(bash_script):
    for c in commands(build_parser()):
        offered = set(complete(bash_script, f"brainbot {c.name} -"))
        assert offered == {f for a in c.args for f in a.flags}, c.name


def zsh_missing() -> str | None:
    return None if shutil.which("zsh") else "zsh not found (Debian: apt-get install zsh)"


def test_zsh_script_is_valid_and_registers_itself(capsys, tmp_path):
    reason = zsh_missing()
    if reason:
        pytest.skip(reason)
    path = tmp_path / "_brainbot"
    path.write_text(script("zsh", capsys))
    run = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    run = subprocess.run(
        ["zsh", "-f", "-c", f"autoload -U compinit && compinit -u -d {tmp_path}/zcd && "
                            f"source {path} && print -r -- $_comps[brainbot]"],
        capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stdout.strip() == "_brainbot", run.stderr


def test_zsh_specs_name_every_option_with_its_choices(capsys):
    text = script("zsh", capsys)
    for c in commands(build_parser()):
        branch = re.search(rf"^        {c.name}\) _arguments \\\n(.*?) ;;$", text,
                           re.M | re.S)
        assert branch, c.name
        for a in c.args:
            for flag in a.flags:
                assert re.search(rf"[{{',]{re.escape(flag)}[',}}\[]", branch.group(1)), \
                    (c.name, flag)
            if a.choices:
                assert f"({' '.join(a.choices)})" in branch.group(1), (c.name, a.choices)
