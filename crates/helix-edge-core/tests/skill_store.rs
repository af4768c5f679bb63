//! Skills kept in a store (an R2 bucket or a KV namespace on the platform; objects in
//! memory here), run by the pure core: the catalog listed as each run starts, a skill
//! edited between two runs seen by the second with its new version, files read by byte
//! range only when asked, `allowed-tools` enforced from what the run loaded, preloaded
//! skills, and a broken skill left out and logged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::Agent;
use helix_edge_core::host::Level;
use helix_edge_core::runner::Progress;
use helix_edge_core::skill::StoredSkills;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::testing::{MemoryObjects, block};
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use support::*;

const NOTES_MD: &str = "---\nname: release-notes\ndescription: Write release notes.\n\
                        allowed-tools: note\n---\nGroup the changes; see `templates/notes.md`.\n";

/// A tool that answers `{}`.
fn noop(name: &str) -> Tool {
    Tool::new(name, "d", |_: serde_json::Map<String, Value>, _| async {
        Ok::<_, helix_edge_core::error::ToolError>(json!({}))
    })
    .into()
}

/// A world whose `librarian` reads its skills from `objects` under `skills/`.
fn world(objects: &MemoryObjects, preload: &[&str]) -> World {
    let librarian = Agent::builder("librarian")
        .system_prompt("You write.")
        .tool(noop("note"))
        .tool(noop("publish"))
        .skill_provider(StoredSkills::new(objects.clone(), "skills/"))
        .preload_skills(preload.iter().copied())
        .build()
        .unwrap();
    let mut w = World::new();
    w.agents = w.agents.clone().with(librarian).unwrap();
    w
}

fn objects() -> MemoryObjects {
    let objects = MemoryObjects::default();
    objects.put("skills/release-notes/SKILL.md", NOTES_MD);
    objects.put(
        "skills/release-notes/templates/notes.md",
        "## Features\n- é\n",
    );
    objects.put(
        "skills/sql-review/SKILL.md",
        "---\nname: sql-review\ndescription: Review SQL.\n---\nCheck every query.\n",
    );
    objects
}

#[test]
fn an_edit_in_the_store_is_seen_by_the_next_run_with_its_version() {
    let objects = objects();
    let w = world(&objects, &[]);
    let r = w.runner("a");
    let load = w
        .model
        .call("load_skill", json!({ "name": "release-notes" }));
    let read = w.model.call(
        "read_skill_file",
        json!({ "name": "release-notes", "path": "templates/notes.md", "offset": 15, "length": 1 }),
    );
    w.model
        .calls(vec![load.clone()])
        .calls(vec![read, w.model.call("publish", json!({}))])
        .text("Done.");
    w.create(&r, "librarian", "notes please");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let first = &w.model.seen()[0];
    assert!(
        first.system.starts_with("You write.\n\n# Skills\n"),
        "{}",
        first.system
    );
    assert!(
        first
            .system
            .contains("- `release-notes`: Write release notes.")
    );
    assert!(first.system.contains("- `sql-review`: Review SQL."));
    let spec = w.agents.get("librarian").unwrap().tool_specs();
    assert!(
        spec[2].input_schema["properties"]["name"]
            .get("enum")
            .is_none(),
        "names change"
    );

    let loaded = &results_seen(&w, 1)[0];
    let v1 = loaded.2["version"].as_str().unwrap().to_string();
    assert_eq!(
        (loaded.1, &loaded.2["files"], &loaded.2["allowedTools"]),
        (false, &json!(["templates/notes.md"]), &json!(["note"]))
    );
    assert!(v1.starts_with("sha256:"), "{v1}");
    let after = results_seen(&w, 2);
    // Byte 15 is inside "é" (bytes 14-15): the range moves back to keep it whole.
    assert_eq!(
        (
            &after[1].2["content"],
            &after[1].2["offset"],
            &after[1].2["totalBytes"]
        ),
        (&json!("é"), &json!(14), &json!(17))
    );
    assert_eq!(after[2].2["code"], "tool_not_allowed", "{:?}", after[2]);

    // The skill is edited in the store; the next run lists and loads the new one.
    objects.put(
        "skills/release-notes/SKILL.md",
        &NOTES_MD
            .replace("Write release notes.", "Write release notes, briefly.")
            .replace("allowed-tools: note\n", ""),
    );
    objects.delete("skills/sql-review/SKILL.md");
    w.model
        .calls(vec![load])
        .calls(vec![w.model.call("publish", json!({}))])
        .text("Again.");
    block(r.send_message(SESSION, "again".into())).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let second = &w.model.seen()[3];
    assert!(
        second
            .system
            .contains("- `release-notes`: Write release notes, briefly.")
    );
    assert!(!second.system.contains("sql-review"), "{}", second.system);
    let reloaded = &results_seen(&w, 4)[3];
    let v2 = reloaded.2["version"].as_str().unwrap();
    assert_ne!(v2, v1, "the edit has a version of its own");
    assert!(reloaded.2.get("allowedTools").is_none());
    let published = results_seen(&w, 5);
    assert_eq!(
        published.last().unwrap().2,
        json!({}),
        "the version loaded last allows every tool"
    );
}

#[test]
fn preloaded_skills_come_with_the_catalog_and_broken_ones_are_logged() {
    let objects = objects();
    objects.put(
        "skills/broken/SKILL.md",
        "---\nname: broken\n---\nno description",
    );
    let w = world(&objects, &["release-notes", "gone"]);
    let r = w.runner("a");
    w.model
        .calls(vec![w.model.call("publish", json!({}))])
        .text("ok");
    w.create(&r, "librarian", "hi");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let system = &w.model.seen()[0].system;
    assert!(
        system.contains("## Skill `release-notes` (loaded)\nGroup the changes"),
        "{system}"
    );
    assert!(!system.contains("broken"), "{system}");
    let refused = &results_seen(&w, 1)[0];
    assert_eq!(
        refused.2["code"], "tool_not_allowed",
        "a preloaded skill limits tools"
    );
    let problems: Vec<String> = w
        .host
        .logs_at(Level::Warn)
        .into_iter()
        .filter(|(event, _)| event == "run_prompt_problem")
        .map(|(_, fields)| fields["problem"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("skill 'broken'") && problems[0].contains("no 'description'"));
    assert!(problems[1].contains("preloaded skill 'gone' is not in the catalog"));
}

#[test]
fn one_place_for_skills() {
    let err = Agent::builder("a")
        .skills([helix_edge_core::skill::Skill::new("s", "d", "i")])
        .skill_provider(StoredSkills::new(MemoryObjects::default(), ""))
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("takes skills from one place"),
        "{err}"
    );
}
