"""nacelle.instructions: AGENTS.md and CLAUDE.md from the user's config folder and from
the repository root down to the working folder, layered in that order and bounded."""

import os

import pytest

from nacelle import instructions as module
from nacelle.instructions import config_dir, instruction_files, instructions, project_dirs


@pytest.fixture
def tree(tmp_path):
    """A fake config folder and a repository with a nested working folder."""
    config = tmp_path / "xdg" / "nacelle"
    config.mkdir(parents=True)
    repo = tmp_path / "home" / "repo"
    work = repo / "pkg" / "sub"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    return tmp_path, config, repo, work, env


def test_the_layers_go_user_first_then_repo_root_down_to_the_working_folder(tree):
    tmp, config, repo, work, env = tree
    (config / "AGENTS.md").write_text("user rule")
    (tmp / "home" / "AGENTS.md").write_text("above the repo: never read")
    (repo / "AGENTS.md").write_text("repo rule")
    (repo / "CLAUDE.md").write_text("repo claude rule")
    (repo / "pkg" / "AGENTS.md").write_text("pkg rule")
    (work / "CLAUDE.md").write_text("sub rule")
    text = instructions(str(work), env=env)
    order = [text.index(rule) for rule in
             ("user rule", "repo rule", "repo claude rule", "pkg rule", "sub rule")]
    assert order == sorted(order)
    assert "never read" not in text
    assert f"# Instructions from {config / 'AGENTS.md'}\n\nuser rule" in text
    assert instruction_files(str(work), env=env) == [
        str(config / "AGENTS.md"), str(repo / "AGENTS.md"), str(repo / "CLAUDE.md"),
        str(repo / "pkg" / "AGENTS.md"), str(work / "CLAUDE.md")]


def test_a_worktree_git_file_marks_the_root_and_outside_a_repo_only_cwd_is_read(tmp_path):
    (tmp_path / "wt" / "a").mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    assert project_dirs(str(tmp_path / "wt" / "a")) == [str(tmp_path / "wt"),
                                                        str(tmp_path / "wt" / "a")]
    (tmp_path / "plain" / "b").mkdir(parents=True)
    (tmp_path / "plain" / "AGENTS.md").write_text("parent, no repo")
    assert project_dirs(str(tmp_path / "plain" / "b")) == [str(tmp_path / "plain" / "b")]


def test_claude_md_linked_to_agents_md_is_read_once(tree):
    _, _, repo, _, env = tree
    (repo / "AGENTS.md").write_text("shared rule")
    os.symlink("AGENTS.md", repo / "CLAUDE.md")
    assert instructions(str(repo), env=env).count("shared rule") == 1


def test_no_files_give_an_empty_text_and_the_default_config_folder_is_xdg(tree, tmp_path):
    _, _, repo, _, env = tree
    assert instructions(str(repo), env=env) == ""
    assert config_dir({"HOME": "/h"}).endswith(os.path.join(".config", "nacelle"))
    assert config_dir({"XDG_CONFIG_HOME": "/x"}) == "/x/nacelle"


def test_sizes_are_bounded_and_each_cut_is_said(tree, monkeypatch):
    _, config, repo, work, env = tree
    monkeypatch.setattr(module, "MAX_FILE_BYTES", 10)
    monkeypatch.setattr(module, "MAX_TOTAL_BYTES", 20)
    (config / "AGENTS.md").write_text("0123456789abcdef")
    (repo / "AGENTS.md").write_text("repo-rule-long")
    (work / "AGENTS.md").write_text("never")
    text = instructions(str(work), env=env)
    assert "0123456789\n[cut: " in text and "abcdef" not in text
    assert "repo-rule-" in text and "never" not in text
    assert f"not read: {work / 'AGENTS.md'}" in text


def test_a_fifo_or_a_folder_named_agents_md_is_skipped_without_blocking(tree):
    _, config, repo, _, env = tree
    os.mkfifo(config / "AGENTS.md")
    (repo / "AGENTS.md").mkdir()
    (repo / "CLAUDE.md").write_bytes(b"caf\xe9 rule")
    assert instructions(str(repo), env=env).endswith("caf\ufffd rule")
