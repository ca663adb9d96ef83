"""User errors are the package's, bugs keep their tracebacks: `r2med` prints a UserError as one line (exit 2) in the
CLI's wording, and lets anything else propagate; each user error keeps the built-in type callers catch."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.errors import MissingFileError, UnknownNameError, UnreachableError, UserError
from r2med_plugin.optional_dependencies import MissingExtraError
from r2med_plugin.rules import RequestError, SettingError


def _broken(error: BaseException):
    def list_tasks(kind=None):
        raise error
    return list_tasks


@pytest.mark.parametrize("bug", [RuntimeError("internal state"), KeyError("internal key"), ValueError("internal value"),
                                 FileNotFoundError("internal path")])
def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch, capsys, bug: Exception):
    monkeypatch.setattr("r2med_plugin.catalog.list_tasks", _broken(bug))
    with pytest.raises(type(bug)) as raised:
        main(["tasks"])
    assert raised.value is bug and raised.traceback  # the error itself, raised where it happened
    assert "r2med: error" not in capsys.readouterr().err


@pytest.mark.parametrize("error", [UserError("bad setting; fix it"), UnknownNameError("unknown task 'X'; did you mean Y"),
                                   MissingFileError("run.trec: no such run file"), UnreachableError("the hub is offline"),
                                   MissingExtraError("charts need matplotlib", name="matplotlib")])
def test_a_user_error_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, capsys, error: UserError):
    monkeypatch.setattr("r2med_plugin.catalog.list_tasks", _broken(error))
    assert main(["tasks"]) == 2
    err = capsys.readouterr().err
    assert err == f"r2med: error: {error}\n"  # one line, the message unquoted (a KeyError's str would quote it)


def test_the_cli_names_settings_by_their_flags(monkeypatch: pytest.MonkeyPatch, capsys):
    setting = SettingError("{step} must be smaller than {window} (got 10 and 10)", field="step")
    request = RequestError("trec_depth", "is the depth of TREC run files", "add {trec}, or drop it")
    for error, flags in ((setting, ("--step", "--window")), (request, ("--depth", "--trec"))):
        monkeypatch.setattr("r2med_plugin.catalog.list_tasks", _broken(error))
        assert main(["tasks"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and all(flag in err for flag in flags)
        assert "(--" not in err  # the Python API's "step (--step)" is not the CLI's wording
    assert str(setting).startswith("step (--step) must be smaller than window (--window)")
    assert setting.render("key").startswith("step must be smaller than window")


def test_real_user_errors_reach_the_cli_as_one_line(tmp_path: Path, capsys):
    assert main(["check", "NoSuchTask"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("r2med: error: ") and "NoSuchTask" in err and err.count("\n") == 1
    missing = tmp_path / "absent.yaml"
    assert main(["sweep", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and err.count("\n") == 1


def test_user_errors_keep_the_builtin_types_callers_catch():
    assert issubclass(UserError, ValueError)
    assert issubclass(UnknownNameError, KeyError) and issubclass(UnknownNameError, UserError)
    assert issubclass(MissingFileError, FileNotFoundError) and issubclass(MissingFileError, UserError)
    assert issubclass(UnreachableError, ConnectionError) and issubclass(UnreachableError, UserError)
    assert issubclass(MissingExtraError, ImportError) and issubclass(MissingExtraError, UserError)
    with pytest.raises(FileNotFoundError):
        from r2med_plugin.sweep import load_spec

        load_spec("/nonexistent/spec.yaml")
    with pytest.raises(KeyError):
        from r2med_plugin.catalog import get_task_spec

        get_task_spec("NoSuchTask")
