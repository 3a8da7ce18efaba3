"""nacelle.toolsets.preview: what approving a local call would do, as plain text (the CLI
makes it safe for a terminal, which tests/test_cli_approval.py checks; the chat page
shows it as text)."""

from nacelle.toolsets import LocalTools
from nacelle.toolsets.preview import change_preview


def test_local_tools_preview_a_write_under_their_root_as_a_unified_diff(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    with LocalTools(tmp_path) as local:
        shown = local.preview("write_file", {"path": "a.txt", "content": "one\nthree\n"})
        assert shown.splitlines() == ["--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one",
                                      "-two", "+three"]
        assert local.preview("read_file", {"path": "a.txt"}) == ""
        assert local.preview("write_file", {"path": "../outside.txt", "content": "x"}) == ""


def test_a_command_is_shown_whole_with_each_further_line_marked_and_its_escapes_kept():
    shown = change_preview("run_command", {"command": "ls\n\x1b[2Krm -rf x"}, None)
    assert shown == "  $ ls\n  > \x1b[2Krm -rf x\n"  # raw: the page draws it as text


def test_without_a_root_only_commands_are_previewed(tmp_path):
    assert change_preview("write_file", {"path": "a.txt", "content": "x"}, None) == ""
    assert change_preview("edit_file", {"path": "a.txt", "old_text": "x", "new_text": "y"},
                          str(tmp_path)) == "  (old_text is not in a.txt; the edit will fail)\n"
