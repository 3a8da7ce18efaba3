"""nacelle.skills: SKILL.md folders found, indexed, loaded lazily, confined; the
front matter subset read by hand (https://agentskills.io/specification)."""

import os

import pytest

from nacelle import Agent, Message, Role, ToolCall, ToolResult, user_text
from nacelle.errors import ConfigError, NacelleError
from nacelle.skills import MAX_BODY_BYTES, MAX_FRONT_MATTER, load, parse_front_matter
from nacelle.testing import ScriptedBackend


def write_skill(parent, name, front=None, body="Do the thing.\n"):
    folder = parent / name
    folder.mkdir(parents=True)
    if front is None:
        front = f"name: {name}\ndescription: Use for {name} work.\n"
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}")
    return folder


def parse(front):
    return parse_front_matter(f"---\n{front}---\nbody\n", "SKILL.md")


def assistant(*parts):
    return Message(Role.ASSISTANT, parts)


def test_a_folder_of_skill_folders_is_found_and_indexed_by_name_and_description(tmp_path):
    write_skill(tmp_path, "pdf-forms")
    write_skill(tmp_path, "csv", front="name: csv\ndescription: >\n  Read CSV files,\n  "
                "clean them.\n")
    (tmp_path / "notes").mkdir()  # no SKILL.md: not a skill
    skills = load(tmp_path)
    assert [s.name for s in skills] == ["csv", "pdf-forms"]
    assert "- csv: Read CSV files, clean them." in skills.index
    assert "- pdf-forms: Use for pdf-forms work." in skills.index
    assert "`skill` tool" in skills.index


def test_one_skill_folder_given_directly_is_loaded(tmp_path):
    folder = write_skill(tmp_path, "one")
    assert [s.name for s in load(folder)] == ["one"]


def test_the_body_is_read_only_when_the_model_asks_for_it(tmp_path):
    folder = write_skill(tmp_path, "lazy", body="first body\n")
    skills = load(tmp_path)
    # Changed after loading: what the tool returns is read at the call.
    (folder / "SKILL.md").write_text("---\nname: lazy\ndescription: d\n---\nsecond body\n")
    assert skills.tool.run({"name": "lazy"}, None) == "second body\n"


def test_loading_reads_only_the_front_matter_so_an_oversized_body_fails_at_the_call(tmp_path):
    write_skill(tmp_path, "big", body="x" * (MAX_BODY_BYTES + 10) + "\n")
    skills = load(tmp_path)  # the body is never read here
    with pytest.raises(NacelleError, match="over .* bytes"):
        skills.tool.run({"name": "big"}, None)


def test_a_file_beside_the_skill_is_read_through_the_confined_file_tools(tmp_path):
    folder = write_skill(tmp_path, "ref")
    (folder / "references").mkdir()
    (folder / "references" / "api.md").write_text("line one\nline two\n")
    skills = load(tmp_path)
    out = skills.tool.run({"name": "ref", "path": "references/api.md"}, None)
    assert "1\tline one" in out and "2\tline two" in out
    assert "line one" not in skills.tool.run({"name": "ref", "path": "references/api.md",
                                              "offset": 2}, None)


def test_a_path_leaving_the_skill_folder_is_refused(tmp_path):
    folder = write_skill(tmp_path / "skills", "safe")
    (tmp_path / "secret.txt").write_text("hunter2")
    os.symlink(tmp_path / "secret.txt", folder / "link.txt")
    skills = load(tmp_path / "skills")
    for path in ("../../secret.txt", str(tmp_path / "secret.txt"), "link.txt"):
        with pytest.raises(NacelleError, match="refused") as caught:
            skills.tool.run({"name": "safe", "path": path}, None)
        assert "hunter2" not in str(caught.value)


def test_an_unknown_skill_name_is_a_failed_call_naming_it(tmp_path):
    write_skill(tmp_path, "known")
    with pytest.raises(ValueError, match="no skill is named 'nope'"):
        load(tmp_path).tool.run({"name": "nope"}, None)


def test_the_agent_adds_the_index_to_its_system_prompt_and_the_tool_loads_the_body(tmp_path):
    write_skill(tmp_path, "greet", body="Say hello in French.\n")
    scripted = ScriptedBackend([
        assistant(ToolCall("c1", "skill", '{"name": "greet"}')),
        "Bonjour",
    ])
    agent = Agent(scripted, "You help.", skills=load(tmp_path))
    result = agent.run([user_text("greet me")])
    assert result.text == "Bonjour"
    first = scripted.requests[0]
    assert first.system.startswith("You help.\n\n# Skills")
    assert "- greet: Use for greet work." in first.system
    assert [t.name for t in first.tools] == ["skill"]
    results = [p for m in result.messages for p in m.parts if isinstance(p, ToolResult)]
    assert "Say hello in French." in str(results[0].result)


def test_an_empty_skill_set_changes_nothing_and_a_wrong_value_is_refused(tmp_path):
    agent = Agent(ScriptedBackend([]), "Plain.", skills=load())
    assert agent.system == "Plain." and agent.tools == ()
    with pytest.raises(ConfigError, match="SkillSet"):
        Agent(ScriptedBackend([]), "Plain.", skills=["not", "skills"])


# -- the front matter -------------------------------------------------------------

def test_quoted_strings_comments_and_continued_plain_values_are_read():
    fields = parse('name: "q"\n# a comment\ndescription: \'it''s\' # note\n'
                   'license: Apache-2.0  # the licence\ncompatibility: needs\n  python3\n')
    assert fields == {"name": "q", "description": "its", "license": "Apache-2.0",
                      "compatibility": "needs python3"}
    assert parse("name: x\ndescription: \"tab\\there \\u00e9\"\n")["description"] == "tab\there é"
    assert parse("name: x\ndescription: 'it''s'\n")["description"] == "it's"


def test_literal_and_folded_blocks_keep_and_fold_lines():
    fields = parse("a: |\n  one\n  two\nb: >-\n  one\n  two\n\n  three\n")
    assert fields["a"] == "one\ntwo\n"
    assert fields["b"] == "one two\nthree"


def test_metadata_is_a_map_of_strings_and_allowed_tools_a_list(tmp_path):
    write_skill(tmp_path, "meta", front="name: meta\ndescription: d\nmetadata:\n  author: ann\n"
                "  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\nversion: 2\n")
    skill = load(tmp_path)["meta"]
    assert skill.metadata == (("author", "ann"), ("version", "1.0"))
    assert skill.allowed_tools == ("Bash(git:*)", "Read")
    assert skill.extra == (("version", "2"),)


@pytest.mark.parametrize("front, why", [
    ("name: x\ntags: [a, b]\n", "flow collections"),
    ("name: x\ntags: {a: b}\n", "flow collections"),
    ("name: x\ntags:\n  - a\n", "only 'metadata' may hold"),
    ("name: &a x\n", "anchors"),
    ("name: x\nname: y\n", "given twice"),
    ("name: x\ndescription: \"open\n", "must end on its line"),
    ("name: x\ndescription: a: b\n", "quote the value"),
    ("name: x\n  indented: y\n", "SKILL.md:3: a plain value may not hold"),
    ("just text\n", "not a 'key: value' line"),
    ("name: x\ndescription: \"\\q\"\n", "escape"),
])
def test_yaml_outside_the_subset_is_refused_naming_the_file_and_line(front, why):
    with pytest.raises(ConfigError, match=why) as caught:
        parse(front)
    assert "SKILL.md:" in str(caught.value)


@pytest.mark.parametrize("front, why", [
    ("description: d\n", "name ''"),
    ("name: Bad_Name\ndescription: d\n", "lowercase"),
    ("name: a--b\ndescription: d\n", "single hyphens"),
    ("name: other\ndescription: d\n", "differs from its folder"),
    ("name: {name}\n", "description is required"),
    ("name: {name}\ndescription: " + "x" * 1025 + "\n", "1025 characters"),
])
def test_the_specifications_field_rules_are_enforced(tmp_path, front, why):
    name = "a--b" if "a--b" in front else ("Bad_Name" if "Bad_Name" in front else "skill-x")
    write_skill(tmp_path, name, front=front.replace("{name}", name))
    with pytest.raises(ConfigError, match=why) as caught:
        load(tmp_path)
    assert "SKILL.md" in str(caught.value)


def test_a_missing_opening_or_closing_fence_is_refused(tmp_path):
    folder = tmp_path / "nofence"
    folder.mkdir()
    (folder / "SKILL.md").write_text("name: nofence\n")
    with pytest.raises(ConfigError, match=":1: a SKILL.md starts with '---'"):
        load(tmp_path)
    (folder / "SKILL.md").write_text("---\nname: nofence\ndescription: d\n")
    with pytest.raises(ConfigError, match="closing '---'"):
        load(tmp_path)


def test_huge_front_matter_and_too_many_skills_are_refused(tmp_path, monkeypatch):
    write_skill(tmp_path / "a", "huge", front="name: huge\ndescription: d\n" +
                "x: y\n" * (MAX_FRONT_MATTER // 5))
    with pytest.raises(ConfigError, match="over 65536 bytes"):
        load(tmp_path / "a")
    import nacelle.skills
    monkeypatch.setattr(nacelle.skills, "MAX_SKILLS", 2)
    for name in ("s-one", "s-two", "s-three"):
        write_skill(tmp_path / "b", name)
    with pytest.raises(ConfigError, match="more than 2 skills"):
        load(tmp_path / "b")


def test_two_skills_of_one_name_are_refused_naming_both(tmp_path):
    write_skill(tmp_path / "a", "same")
    write_skill(tmp_path / "b", "same")
    with pytest.raises(ConfigError, match="two skills are named 'same'"):
        load(tmp_path / "a", tmp_path / "b")


def test_a_path_that_is_not_a_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="is not a folder"):
        load(tmp_path / "missing")


def test_non_utf8_front_matter_is_a_config_error(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes(b"---\nname: bin\ndescription: \xff\n---\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load(tmp_path)
