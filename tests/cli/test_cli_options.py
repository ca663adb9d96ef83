"""The argument types of the `r2med` parser (r2med_plugin.cli.options)."""

from __future__ import annotations

import pytest


def test_non_positive_counts_are_refused_by_the_parser(capsys):
    from r2med_plugin.cli import main

    for argv in (["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "org/m", "--batch-size", "0"],
                 ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--workers", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2 and "must be an integer of at least 1" in capsys.readouterr().err


def test_a_command_parser_knows_which_options_were_written_without_argparse_internals():
    from r2med_plugin.cli import build_parser

    parser = build_parser()
    written = parser.parse_args(["evaluate", "--task", "NanoR2MEDBiology", "--batch-size", "32", "--top-k", "1000", "--hybrid"])
    assert written.given == ["task", "batch_size", "top_k", "hybrid"]  # in the order written; a default value counts too
    assert (written.batch_size, written.top_k, written.hybrid) == (32, 1000, True)
    assert (written.device, written.dtype, written.rerank_depth, written.trec, written.candidates) == ("auto", "auto", 10, False, None)
    export = parser.parse_args(["export", "--trec", "runs", "--out", "x"])
    assert export.given == ["trec", "out"] and export.uses_llm is None and export.depth == 1000 and export.force is False
    assert parser.parse_args(["export", "--submission", "r", "--out", "x", "--no-uses-llm"]).uses_llm is False


def test_every_option_default_is_kept_by_the_command_parser():
    from r2med_plugin.cli import build_parser
    from r2med_plugin.cli.options import CommandParser

    parser = build_parser()
    evaluate = parser.parse_args(["evaluate", "--task", "NanoR2MEDBiology"])
    command = CommandParser(prog="probe")
    command.add_argument("--count", type=int, default=3)
    command.add_argument("--switch", action="store_true")
    group = command.add_argument_group("group")
    group.add_argument("--name", default="x")
    probe = command.parse_args([])
    assert (probe.count, probe.switch, probe.name, probe.given) == (3, False, "x", [])
    assert command.option_defaults == {"count": 3, "switch": False, "name": "x"}
    assert command.option_flags["name"] == ("--name",)
    assert evaluate.given == ["task"]


def test_of_several_options_that_reach_no_code_the_first_written_is_refused(capsys):
    """The refusal names the option the command line wrote first, whatever the order of the declarations."""
    from r2med_plugin.cli import main

    base = ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene"]
    for extra, refused in ((["--model-revision", "x", "--instruction"], "--model-revision"),
                           (["--instruction", "--model-revision", "x"], "--instruction"),
                           (["--loader=mteb", "--batch-size", "8"], "--loader")):
        assert main([*base, *extra]) == 2
        assert capsys.readouterr().err.startswith(f"r2med: error: {refused} reaches no code here")


def test_a_parse_error_is_one_line_with_a_did_you_mean(capsys):
    from r2med_plugin.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-hakari", "--dtype", "bf16"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith("r2med: error: argument --dtype: invalid choice: 'bf16'") and "did you mean 'bfloat16'?" in err
    assert "`r2med evaluate --help` lists the options" in err
    with pytest.raises(SystemExit):
        main(["export", "out1", "--submission"])
    assert capsys.readouterr().err.startswith("r2med: error: argument --submission: expected at least one argument")


@pytest.mark.parametrize(
    ("argv", "written", "meant"),
    [
        (["sweep", "s.yaml", "--dev", "cpu"], "--dev", "did you mean '--device'?"),  # a prefix of --device and --devices (one setting)
        (["evaluate", "--task", "NanoR2MEDBiology", "--batch", "8"], "--batch", "did you mean '--batch-size'?"),  # a unique prefix too
        (["evaluate", "--task", "NanoR2MEDBiology", "--retreiver", "bm25-lucene"], "--retreiver", "did you mean '--retriever'?"),
        (["sweep", "s.yaml", "--devicess", "cpu"], "--devicess", "did you mean '--device'?"),
    ],
)
def test_an_abbreviated_or_unknown_option_is_refused_in_one_line_with_a_did_you_mean(capsys, argv, written, meant):
    """Options are written in full: a prefix silently picking a flag (or refused as ambiguous between two names of one
    setting) is a trap; an unknown option names the one meant, in the one-line form of every refusal."""
    from r2med_plugin.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith(f"r2med: error: unrecognized arguments: {written}") and meant in err
    assert f"`r2med {argv[0]} --help` lists the options" in err
    assert ("options are written in full" in err) is (written in ("--dev", "--batch"))


def test_a_mistyped_command_is_one_line_with_a_did_you_mean(capsys):
    from r2med_plugin.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["evaluat", "--task", "NanoR2MEDBiology"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith("r2med: error: argument command: invalid choice: 'evaluat'") and "did you mean 'evaluate'?" in err
