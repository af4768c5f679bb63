//! What skills add to an agent: the catalog (and preloaded skills) in its system prompt,
//! and the `load_skill` and `read_skill_file` tools over its skill provider.

use super::provider::SkillProvider;
use super::{LOAD_SKILL, READ_SKILL_FILE, Skill, SkillError};
use crate::error::ToolError;
use crate::objects::FileBytes;
use crate::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write;
use std::rc::Rc;

/// Input of `load_skill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadSkill {
    /// The skill's name.
    name: String,
}

/// Input of `read_skill_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReadSkillFile {
    /// The skill's name.
    name: String,
    /// The file's path, as `load_skill` lists it.
    path: String,
    /// The first line to read (from 1; default: the first).
    #[schemars(range(min = 1))]
    start_line: Option<usize>,
    /// The last line to read (inclusive; default: the last).
    #[schemars(range(min = 1))]
    end_line: Option<usize>,
    /// For a large file, instead of lines: the first byte to read (from 0).
    offset: Option<usize>,
    /// With `offset`: how many bytes to read at most (default: to the end).
    #[schemars(range(min = 1))]
    length: Option<usize>,
}

/// The system prompt's part on `skills`: how to use them, the catalog, and the
/// instructions of the `preloaded` ones.
pub(crate) fn catalog(skills: &[Skill], preloaded: &[String]) -> String {
    let mut text = format!(
        "\n\n# Skills\nSkills are instructions for particular tasks. When a task matches a \
         skill's description, call `{LOAD_SKILL}` with its name before you start and follow \
         what it says; read the files it mentions with `{READ_SKILL_FILE}` (by path; \
         `startLine` and `endLine`, counted from 1, for part of a long file).\n"
    );
    for skill in skills {
        let _ = writeln!(text, "- `{}`: {}", skill.name, skill.description);
    }
    for skill in skills.iter().filter(|s| preloaded.contains(&s.name)) {
        let _ = write!(
            text,
            "\n## Skill `{}` (loaded)\n{}\n",
            skill.name, skill.instructions
        );
        if !skill.files.is_empty() {
            let files: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
            let _ = writeln!(text, "Its files: {}.", files.join(", "));
        }
    }
    text
}

/// The `load_skill` and `read_skill_file` tools over `provider` (with skills fixed at
/// build time, their `name` arguments list the skills' names).
pub(crate) fn skill_tools(provider: Rc<dyn SkillProvider>) -> [Tool; 2] {
    let names = provider
        .fixed()
        .map(|skills| json!(skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()));
    let loads = provider.clone();
    let load: Tool = Tool::new(
        LOAD_SKILL,
        "Load a skill: its instructions and the list of its files.",
        move |input: LoadSkill, _| {
            let provider = loads.clone();
            async move { load(&*provider, &input.name).await }
        },
    )
    .into();
    let read: Tool = Tool::new(
        READ_SKILL_FILE,
        "Read a file of a skill, whole or a range of its lines (counted from 1).",
        move |input: ReadSkillFile, _| {
            let provider = provider.clone();
            async move { read_file(&*provider, &input).await }
        },
    )
    .into();
    [load, read].map(|mut tool| {
        if let Some(names) = &names {
            tool.input_schema["properties"]["name"]["enum"] = names.clone();
        }
        tool
    })
}

async fn load(provider: &dyn SkillProvider, name: &str) -> Result<Value, ToolError> {
    let Some(loaded) = provider.load(name).await.map_err(failed)? else {
        return Err(no_skill(provider, name, LOAD_SKILL));
    };
    let skill = &loaded.skill;
    let mut result =
        json!({ "name": skill.name, "instructions": skill.instructions, "files": loaded.files });
    skill.front.shown(&mut result);
    Ok(result)
}

/// A provider's failure, as the model sees it.
fn failed(e: SkillError) -> ToolError {
    ToolError::Failed {
        message: e.to_string(),
        source: None,
    }
}

fn no_skill(provider: &dyn SkillProvider, name: &str, tool: &str) -> ToolError {
    let known = match provider.fixed() {
        Some(skills) => {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            format!("skills: {}", names.join(", "))
        }
        None => "the skills are those the system prompt lists".into(),
    };
    ToolError::InputInvalid {
        tool: tool.into(),
        reason: format!("there is no skill '{name}' ({known})"),
    }
}

async fn read_file(
    provider: &dyn SkillProvider,
    input: &ReadSkillFile,
) -> Result<Value, ToolError> {
    let invalid = |reason: String| ToolError::InputInvalid {
        tool: READ_SKILL_FILE.into(),
        reason,
    };
    let bytes = input.offset.is_some() || input.length.is_some();
    if bytes && (input.start_line.is_some() || input.end_line.is_some()) {
        return Err(invalid(
            "read lines or bytes, not both: give startLine/endLine or offset/length".into(),
        ));
    }
    // A byte range is read with up to 3 bytes either side, to keep whole characters.
    let range = bytes.then(|| {
        let offset = input.offset.unwrap_or(0) as u64;
        let end = input
            .length
            .map_or(u64::MAX, |n| offset.saturating_add(n as u64 + 3));
        offset.saturating_sub(3)..end
    });
    let (name, path) = (&input.name, &input.path);
    let Some(file) = provider.read(name, path, range).await.map_err(failed)? else {
        let Some(loaded) = provider.load(name).await.map_err(failed)? else {
            return Err(no_skill(provider, name, READ_SKILL_FILE));
        };
        return Err(invalid(format!(
            "skill '{name}' has no file '{path}' (files: {})",
            loaded.files.join(", ")
        )));
    };
    if bytes {
        return read_bytes(input, &file).map_err(invalid);
    }
    let text = std::str::from_utf8(&file.bytes)
        .map_err(|_| invalid(format!("'{path}' is not UTF-8 text")))?;
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let start = input.start_line.unwrap_or(1);
    let end = input.end_line.unwrap_or(total).min(total);
    if start == 0 || input.end_line == Some(0) {
        return Err(invalid("lines are counted from 1".into()));
    }
    if start > total.max(1) {
        return Err(invalid(format!(
            "startLine {start} is past the end ('{path}' has {total} lines)"
        )));
    }
    if input.end_line.is_some_and(|e| e < start) {
        return Err(invalid(format!("endLine is before startLine {start}")));
    }
    let content = lines.get(start - 1..end).unwrap_or_default().join("\n");
    Ok(json!({
        "name": name,
        "path": path,
        "startLine": start,
        "endLine": end,
        "totalLines": total,
        "content": content,
    }))
}

/// The asked byte range (`offset`, at most `length` bytes) of a file, from `window` (the
/// bytes read around it), moved back to the characters' boundaries so the text stays
/// whole.
fn read_bytes(input: &ReadSkillFile, window: &FileBytes) -> Result<Value, String> {
    let total = window.total;
    let offset = input.offset.unwrap_or(0) as u64;
    if offset > total || (offset == total && total > 0) {
        return Err(format!(
            "offset {offset} is past the end ('{}' has {total} bytes)",
            input.path
        ));
    }
    if input.length == Some(0) {
        return Err("length must be at least 1".into());
    }
    let from = window.offset;
    let boundary = |at: u64| {
        at == total
            || at
                .checked_sub(from)
                .and_then(|i| window.bytes.get(i as usize))
                .is_some_and(|b| b & 0xC0 != 0x80)
    };
    let mut start = offset;
    while start > from && !boundary(start) {
        start -= 1;
    }
    let mut end = input
        .length
        .map_or(total, |n| start.saturating_add(n as u64).min(total));
    while end > start && !boundary(end) {
        end -= 1;
    }
    // At least the character at the offset, however short the length.
    if end <= start && start < total {
        end = start + 1;
        while end < total && !boundary(end) {
            end += 1;
        }
    }
    let slice = window
        .bytes
        .get((start - from) as usize..(end - from) as usize)
        .unwrap_or_default();
    let content =
        std::str::from_utf8(slice).map_err(|_| format!("'{}' is not UTF-8 text", input.path))?;
    Ok(json!({
        "name": input.name,
        "path": input.path,
        "offset": start,
        "length": end - start,
        "totalBytes": total,
        "content": content,
    }))
}
