//! `librarian`: writes with skills kept outside the worker (feature `skill-store`): the
//! reference worker gives it the `skills/` folder of its `FILES` R2 bucket, so a skill
//! edited there is used by the next run without a deploy. Its tools: `note` (a line of
//! the document) and `publish` (the document), which a skill's `allowed-tools` can
//! leave out.

use helix_edge::agent::Agent;
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::skill::SkillProvider;
use helix_edge::tool::{ServerTool, Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Input of `note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// What to note.
    pub text: String,
}

/// Input of `publish`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publish {}

/// The `librarian` agent (named `name`), its skills from `skills`.
pub fn librarian(
    name: &str,
    skills: impl SkillProvider + 'static,
) -> Result<Agent, DefinitionError> {
    let note: ServerTool = Tool::new(
        "note",
        "Note a line of the document being written.",
        |input: Note, _: ToolContext| async move {
            Ok::<Value, ToolError>(json!({ "noted": input.text }))
        },
    );
    let publish: ServerTool = Tool::new(
        "publish",
        "Publish the document written so far.",
        |_: Publish, _: ToolContext| async move { Ok::<Value, ToolError>(json!({ "published": true })) },
    );
    Agent::builder(name)
        .description("Writes documents with the skills kept in the deployment's FILES bucket.")
        .system_prompt(
            "You write documents. When a task matches a skill, load it first and follow it; note each line \
             with `note`.",
        )
        .tool(note)
        .tool(publish)
        .skill_provider(skills)
        .build()
}
