//! Skills, run by the pure core: a directory of SKILL.md files embedded at build time,
//! the catalog and preloaded skills in the system prompt, `load_skill` and
//! `read_skill_file` (line ranges, clear errors), loaded skills read back from the
//! transcript by another process, and the definition rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::Agent;
use helix_edge_core::error::DefinitionError;
use helix_edge_core::runner::Progress;
use helix_edge_core::skill::{self, Skill};
use helix_edge_core::store::SessionStatus;
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use support::*;

fn skills() -> Vec<Skill> {
    helix_edge_core::skills_dir!("tests/skills")
}

/// A tool that answers `{}`.
fn noop(name: &str) -> Tool {
    Tool::new(name, "d", |_: serde_json::Map<String, Value>, _| async {
        Ok::<_, helix_edge_core::error::ToolError>(json!({}))
    })
    .into()
}

fn writer(preload: &[&str]) -> Agent {
    Agent::builder("writer")
        .system_prompt("You write.")
        .tool(noop("note"))
        .tool(noop("publish"))
        .skills(skills())
        .preload_skills(preload.iter().copied())
        .build()
        .unwrap()
}

/// A world whose agents include `writer`.
fn world(preload: &[&str]) -> World {
    let mut w = World::new();
    w.agents = w.agents.clone().with(writer(preload)).unwrap();
    w
}

/// The tool results the model saw in its `n`th call: whether each failed, and its
/// content.
fn seen(w: &World, n: usize) -> Vec<(bool, Value)> {
    results_seen(w, n)
        .into_iter()
        .map(|(_, is_error, content)| (is_error, content))
        .collect()
}

#[test]
fn a_directory_of_skills_is_embedded_with_its_files() {
    let skills = skills();
    let names: Vec<&str> = skills.iter().map(Skill::name).collect();
    assert_eq!(names, ["release-notes", "sql-review"]);
    let notes = &skills[0];
    assert_eq!(
        notes.description(),
        "Write release notes from a list of changes. Use it when asked for release notes or a changelog entry."
    );
    assert!(
        notes
            .instructions()
            .starts_with("# Release notes\n\n1. Group")
    );
    assert_eq!(notes.files().len(), 1);
    assert_eq!(notes.files()[0].path, "templates/notes.md");
    assert!(notes.files()[0].content.starts_with("## Features\n"));
    assert_eq!(
        skills[1].description(),
        "Review SQL for injection and missing indexes."
    );
    assert!(skills[1].files().is_empty());
}

#[test]
fn the_model_sees_the_catalog_the_preloaded_skill_and_the_tools() {
    let w = world(&["sql-review"]);
    let r = w.runner("a");
    w.model.text("ok");
    w.create(&r, "writer", "hi");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let seen = &w.model.seen()[0];
    assert!(
        seen.system.starts_with("You write.\n\n# Skills\n"),
        "{}",
        seen.system
    );
    assert!(
        seen.system
            .contains("- `release-notes`: Write release notes")
    );
    assert!(seen.system.contains("- `sql-review`: Review SQL"));
    assert!(
        seen.system
            .contains("## Skill `sql-review` (loaded)\nCheck every query for string concatenation")
    );
    assert!(
        !seen.system.contains("## Skill `release-notes`"),
        "not preloaded"
    );
    assert_eq!(
        seen.tools,
        ["note", "publish", "load_skill", "read_skill_file"]
    );
    let specs = writer(&[]).tool_specs();
    for spec in specs.iter().filter(|s| s.name.contains("skill")) {
        let names = &spec.input_schema["properties"]["name"]["enum"];
        assert_eq!(
            names,
            &json!(["release-notes", "sql-review"]),
            "{}",
            spec.name
        );
    }
}

#[test]
fn a_skill_is_loaded_its_file_read_and_both_are_recoverable_from_the_transcript() {
    let w = world(&[]);
    let r = w.runner("a");
    let read = |args: Value| w.model.call("read_skill_file", args);
    w.model
        .calls(vec![w.model.call("load_skill", json!({ "name": "release-notes" }))])
        .calls(vec![
            read(json!({ "name": "release-notes", "path": "templates/notes.md" })),
            read(json!({ "name": "release-notes", "path": "templates/notes.md", "startLine": 3, "endLine": 4 })),
            read(json!({ "name": "release-notes", "path": "templates/notes.md", "startLine": 5, "endLine": 99 })),
            read(json!({ "name": "release-notes", "path": "templates/notes.md", "startLine": 9 })),
            read(json!({ "name": "release-notes", "path": "templates/notes.md", "startLine": 2, "endLine": 1 })),
            read(json!({ "name": "release-notes", "path": "nope.md" })),
            read(json!({ "name": "nope", "path": "x" })),
        ])
        .text("Here are your notes.");
    w.create(&r, "writer", "release notes please");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let loaded = seen(&w, 1);
    let version = skills()[0].frontmatter().version.clone().unwrap();
    assert!(
        version.starts_with("sha256:") && version.len() == 23,
        "{version}"
    );
    assert_eq!(
        loaded,
        [(
            false,
            json!({
                "name": "release-notes",
                "instructions": "# Release notes\n\n1. Group the changes: features, fixes, other.\n2. Use the template in `templates/notes.md`.",
                "files": ["templates/notes.md"],
                "version": version,
                "license": "Apache-2.0",
                "compatibility": "Needs the changes as a list.",
                "metadata": { "version": "1.0" },
                "allowedTools": ["note"],
            })
        )]
    );
    let reads = seen(&w, 2);
    let reads = &reads[1..];
    let ok = |start: u64, end: u64, content: &str| {
        (
            false,
            json!({ "name": "release-notes", "path": "templates/notes.md", "startLine": start,
                    "endLine": end, "totalLines": 6, "content": content }),
        )
    };
    assert_eq!(
        reads[0],
        ok(1, 6, "## Features\n- …\n## Fixes\n- …\n## Other\n- …")
    );
    assert_eq!(reads[1], ok(3, 4, "## Fixes\n- …"));
    assert_eq!(reads[2], ok(5, 6, "## Other\n- …"), "the end is clamped");
    let errors: Vec<String> = reads[3..]
        .iter()
        .map(|(is_error, c)| {
            assert!(is_error);
            assert_eq!(c["code"], "tool_input_invalid");
            c["error"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(errors[0].contains("startLine 9 is past the end ('templates/notes.md' has 6 lines)"));
    assert!(errors[1].contains("endLine is before startLine 2"));
    assert!(
        errors[2]
            .contains("skill 'release-notes' has no file 'nope.md' (files: templates/notes.md)")
    );
    assert!(errors[3].contains("there is no skill 'nope' (skills: release-notes, sql-review)"));

    // Another process reads the loaded skills back from the stored transcript.
    let _other = w.runner("b");
    assert_eq!(skill::loaded(&w.messages()), ["release-notes"]);
}

#[test]
fn definitions_are_checked() {
    let build = |b: helix_edge_core::agent::AgentBuilder| b.build().unwrap_err();
    let agent = || Agent::builder("a").system_prompt("p");
    for reserved in ["load_skill", "read_skill_file"] {
        let tool = Tool::new(
            reserved,
            "d",
            |_: serde_json::Map<String, Value>, _| async {
                Ok::<_, helix_edge_core::error::ToolError>(json!({}))
            },
        );
        assert_eq!(
            build(agent().tool(tool)),
            DefinitionError::ReservedToolName(reserved.into())
        );
    }
    let twice = build(
        agent()
            .skills(skills())
            .skills([Skill::new("sql-review", "d", "i")]),
    );
    assert!(
        twice
            .to_string()
            .contains("skill 'sql-review' is given twice"),
        "{twice}"
    );
    let unknown = build(agent().skills(skills()).preload_skills(["nope"]));
    assert!(
        unknown.to_string().contains("preloads skill 'nope'"),
        "{unknown}"
    );
    let none = build(agent().preload_skills(["x"]));
    assert!(none.to_string().contains("has no skills"), "{none}");
    let bad = build(agent().skills([Skill::new("Bad_Name", "d", "i")]));
    assert_eq!(
        bad.to_string(),
        "Agent 'a': skill 'Bad_Name': the name must be 1-64 characters of a-z, 0-9 and '-'"
    );
    let empty = build(agent().skills([Skill::new("x", "d", "\n  \n")]));
    assert_eq!(
        empty.to_string(),
        "Agent 'a': skill 'x': the instructions are empty"
    );
}

#[test]
fn the_frontmatter_is_kept_and_the_version_follows_the_content() {
    let skills = skills();
    let front = skills[0].frontmatter();
    assert_eq!(front.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(
        front.compatibility.as_deref(),
        Some("Needs the changes as a list.")
    );
    assert_eq!(front.metadata, [("version".to_string(), "1.0".to_string())]);
    assert_eq!(front.allowed_tools, Some(vec!["note".to_string()]));
    assert_eq!(skills[1].frontmatter().allowed_tools, None);
    assert_ne!(
        front.version,
        skills[1].frontmatter().version,
        "each skill's content has its own version"
    );
}

#[test]
fn while_a_skill_that_lists_its_tools_is_loaded_no_other_tool_runs() {
    let w = world(&[]);
    let r = w.runner("a");
    let call = |name: &str| w.model.call(name, json!({}));
    // Before the skill: any tool. After loading it: its tools, the skill tools.
    w.model
        .calls(vec![call("publish")])
        .calls(vec![
            w.model
                .call("load_skill", json!({ "name": "release-notes" })),
        ])
        .calls(vec![
            call("note"),
            call("publish"),
            w.model.call(
                "read_skill_file",
                json!({ "name": "release-notes", "path": "templates/notes.md" }),
            ),
        ])
        .text("Done.");
    w.create(&r, "writer", "notes");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(seen(&w, 1), [(false, json!({}))], "publish ran before");
    let after = seen(&w, 3);
    let after = &after[2..];
    assert_eq!(after[0], (false, json!({})), "note is allowed");
    assert_eq!(after[1].1["code"], "tool_not_allowed");
    assert_eq!(
        after[1].1["error"],
        "Not run: while skill 'release-notes' is loaded, only these tools may be called: note"
    );
    assert!(!after[2].0, "the skill tools stay allowed");

    // A follow-up is a new run: the skill is not loaded in it.
    w.model.calls(vec![call("publish")]).text("Published.");
    block(r.send_message(SESSION, "publish now".into())).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let last = w.model.seen().len() - 1;
    assert_eq!(seen(&w, last).last().unwrap(), &(false, json!({})));

    // A preloaded one limits the tools from the start.
    let w = world(&["release-notes"]);
    let r = w.runner("a");
    w.model.calls(vec![call("publish")]).text("Done.");
    w.create(&r, "writer", "notes");
    drive(&r);
    assert_eq!(seen(&w, 1)[0].1["code"], "tool_not_allowed");
}

#[test]
fn a_skill_may_allow_only_tools_the_agent_has() {
    let err = Agent::builder("a")
        .system_prompt("p")
        .skills([Skill::new("s", "d", "i").allowed_tools(["deploy"])])
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Agent 'a': skill 's' allows tool 'deploy', which the agent does not have"
    );
}

#[test]
fn a_large_file_is_read_by_byte_ranges_that_keep_characters_whole() {
    let w = world(&[]);
    let r = w.runner("a");
    let read = |args: Value| {
        let mut args = args;
        args["name"] = json!("release-notes");
        args["path"] = json!("templates/notes.md");
        w.model.call("read_skill_file", args)
    };
    // "## Features\n- …\n…": bytes 14..17 are the three of '…'.
    w.model
        .calls(vec![
            read(json!({ "offset": 0, "length": 11 })),
            read(json!({ "offset": 15, "length": 4 })),
            read(json!({ "offset": 14, "length": 1 })),
            read(json!({ "offset": 40 })),
            read(json!({ "offset": 999 })),
            read(json!({ "offset": 0, "startLine": 1 })),
        ])
        .text("Read.");
    w.create(&r, "writer", "read it");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let results = seen(&w, 1);
    let ok = |i: usize| {
        assert!(!results[i].0, "{:?}", results[i]);
        results[i].1.clone()
    };
    let file = skills()[0].files()[0].content.clone();
    assert_eq!(ok(0)["content"], "## Features");
    assert_eq!(ok(0)["totalBytes"], file.len());
    // Inside '…': moved back to where it starts, and the character kept whole.
    assert_eq!(
        (ok(1)["offset"].clone(), ok(1)["content"].clone()),
        (json!(14), json!("…\n"))
    );
    assert_eq!(
        ok(2)["content"],
        "…",
        "at least the character at the offset"
    );
    assert_eq!(ok(3)["content"], file[40..]);
    for (i, why) in [
        (4, "offset 999 is past the end"),
        (5, "read lines or bytes, not both"),
    ] {
        assert!(results[i].0);
        assert!(
            results[i].1["error"].as_str().unwrap().contains(why),
            "{:?}",
            results[i]
        );
    }
}
