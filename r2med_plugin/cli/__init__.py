"""The `r2med` command: its parser (one module per command: tasks, evaluate, generate, results, reproduce, sweep,
compare, audit) and ``main``, which prints a user's mistake as one line and lets a bug keep its traceback."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from r2med_plugin.cli.options import CommandParser, OneLineParser
from r2med_plugin.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    from r2med_plugin.cli import audit, compare, reproduce, results, sweep, tasks
    from r2med_plugin.cli.evaluate import add_evaluate_command
    from r2med_plugin.cli.generate import add_generate_command
    from r2med_plugin.version import __version__

    parser = OneLineParser(prog="r2med", description="R2MED and NanoR2MED retrieval evaluation.")
    parser.add_argument("--version", action="version", version=f"r2med-plugin {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for add in (tasks.add_commands, add_evaluate_command, add_generate_command, results.add_commands, reproduce.add_commands,
                sweep.add_commands, compare.add_commands, audit.add_commands):
        add(commands)
    return parser


class _OncePerMessage(logging.Filter):
    """Within one command, a warning whose text was already shown is not shown again (the unverified-mirror
    warning is the same for every task of a mirror, and would repeat per task and per expansion)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def _package_messages() -> logging.Handler:
    """The package's warnings on stderr, each text once per command."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_OncePerMessage())
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)  # args.given: the options the command line wrote (CommandParser)
    package_logger = logging.getLogger("r2med_plugin")
    handler = _package_messages()
    package_logger.addHandler(handler)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Result files are written atomically: an interrupted run leaves no partial file behind.
        print("r2med: interrupted (Ctrl-C); files already written are complete, none is partial", file=sys.stderr)
        return 130
    except UserError as error:  # the user's mistake, worded with the CLI's flags; anything else is a bug: its traceback
        print(f"r2med: error: {error.flag_message}", file=sys.stderr)
        return 2
    finally:
        package_logger.removeHandler(handler)
        from r2med_plugin.quiet import restore_libraries

        restore_libraries()
