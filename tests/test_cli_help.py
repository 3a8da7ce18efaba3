"""The help text's epilog (nacelle/cli/help.py) against what the CLI does: every
subcommand, every setting's variable and every exit code is there."""

import re

from nacelle.cli import app, help as cli_help
from nacelle.cli.help import EPILOG
from nacelle.settings import KEYS


def test_every_subcommand_is_listed():
    listed = set(re.findall(r"^  ([a-z]+)\b", EPILOG.split("prompts:")[0], re.M))
    assert listed == set(app.COMMANDS)


def test_every_setting_has_its_environment_variable_named():
    missing = [k for k in KEYS if f"NACELLE_{k.upper()}" not in EPILOG]
    assert missing == []


def test_every_exit_code_is_explained():
    codes = {cli_help.EXIT_OK, cli_help.EXIT_FAILED, cli_help.EXIT_USAGE,
             cli_help.EXIT_INCOMPLETE, cli_help.EXIT_INTERRUPTED}
    explained = {int(c) for c in re.findall(r"^  (\d+) ", EPILOG.split("exit codes:")[1], re.M)}
    assert codes <= explained
