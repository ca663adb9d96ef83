"""Write docs/reference/cli.md from the argparse parser of `r2med` (r2med_plugin.cli.build_parser()).

    python scripts/generate_cli_reference.py          # (re)write docs/reference/cli.md
    python scripts/generate_cli_reference.py --check  # exit 1 if the committed file differs from the parser

Every subcommand, every option with its help, default and choices. Options whose help is argparse.SUPPRESS are
hidden from `--help` too and are left out here. tests/contracts/test_docs.py runs the check, so the page cannot drift.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reference" / "cli.md"
# usage lines wrap at the terminal width: fix it so the page is the same on every machine
WIDTH = "100"


def _escape(text: str) -> str:
    """Help text as Markdown that renders as written (no emphasis, links or raw HTML)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\`*_[]":
        text = text.replace(char, "\\" + char)
    return text


def _code(value: object) -> str:
    text = str(value)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split())


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                found.append((name, helps.get(name, ""), subparser))
    return found


def _signature(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    if not action.option_strings:
        return formatter._format_args(action, action.dest) if action.nargs not in (None,) else action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    args = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return ", ".join(f"{option} {args}" for option in action.option_strings)


def _describe(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    parts = [f"- **{_code(_signature(action, parser))}**"]
    if action.option_strings and action.required:
        parts.append(" (required)")
    text = _help(parser, action)
    if text:
        parts.append(f": {_escape(text)}")
    extra = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        extra.append("choices: " + ", ".join(_code(choice) for choice in action.choices))
    takes_value = action.nargs != 0
    # an `r2med` command's parser keeps its options' defaults itself (r2med_plugin.cli.options.CommandParser)
    value = getattr(parser, "option_defaults", {}).get(action.dest, action.default)
    if takes_value and value not in (None, argparse.SUPPRESS) and action.option_strings:
        default = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        extra.append("default: the empty string" if default == "" else f"default: {_code(default)}")
    if extra:
        parts.append(" (" + "; ".join(extra) + ")")
    return "".join(parts)


def _section(name: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{name}`", ""]
    if summary:
        lines += [_escape(summary[0].upper() + summary[1:]) + ".", ""]
    if parser.description and parser.description != summary:
        lines += [_escape(" ".join(parser.description.split())), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    positionals = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
                   and a.help != argparse.SUPPRESS]
    options = [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
               and not isinstance(a, argparse._HelpAction)]
    if positionals:
        lines += ["Arguments:", ""] + [_describe(a, parser) for a in positionals] + [""]
    if options:
        lines += ["Options:", ""] + [_describe(a, parser) for a in options] + [""]
    for group in parser._mutually_exclusive_groups:
        names = ", ".join(_code(a.option_strings[-1] if a.option_strings else a.dest) for a in group._group_actions
                          if a.help != argparse.SUPPRESS)
        lines += [f"{'Exactly one' if group.required else 'At most one'} of {names} "
                  f"{'must' if group.required else 'can'} be given.", ""]
    for sub_name, sub_help, subparser in _subcommands(parser):
        lines += _section(f"{name} {sub_name}", sub_help, subparser, level + 1)
    return lines


def render() -> str:
    os.environ["COLUMNS"] = WIDTH
    sys.path.insert(0, str(ROOT))
    from r2med_plugin.cli import build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    lines = [
        "# Command line: `r2med`",
        "",
        "<!-- generated by scripts/generate_cli_reference.py from r2med_plugin.cli.build_parser(); do not edit by hand -->",
        "",
        "This page is generated from the command's own argument parser, so it lists exactly what "
        "`r2med <command> --help` prints: every subcommand, every option, its default and its choices. "
        "Rules between options (which combinations are refused, and why) are in the "
        "how-to guides ([models](../how-to/models.md), [rerankers](../how-to/rerankers.md)) and in the "
        "[evaluation semantics](../explanation/evaluation-semantics.md). Options are written in full: a prefix "
        "(`--batch` for `--batch-size`) is refused as an unknown option, with a did-you-mean.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    for name, summary, _ in commands:
        lines.append(f"| [`{name}`](#r2med-{name}) | {_escape(summary).replace('|', '&#124;')} |")
    lines.append("")
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    options = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    lines += ["Options of `r2med` itself:", ""] + [_describe(a, parser) for a in options] + [""]
    lines.append("Every command also takes `-h, --help`.")
    lines.append("")
    for name, summary, subparser in commands:
        lines += _section(f"r2med {name}", summary, subparser, 2)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--check", action="store_true", help="exit 1 if the committed page differs from the parser")
    options = arguments.parse_args(argv)
    text = render()
    if options.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current == text:
            print(f"{OUTPUT.relative_to(ROOT)} is up to date")
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "committed", "generated", lineterm="", n=1)
        print("\n".join(list(diff)[:60]))
        print(f"{OUTPUT.relative_to(ROOT)} differs from the parser: run python scripts/generate_cli_reference.py")
        return 1
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
