//! What skills add to an agent: the catalog (and preloaded skills) in its system prompt,
//! and the `load_skill` and `read_skill_file` tools over its skills.

use super::{LOAD_SKILL, READ_SKILL_FILE, Skill};
use crate::error::ToolError;
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

/// The `load_skill` and `read_skill_file` tools over `skills` (their `name` arguments
/// list the skills' names).
pub(crate) fn skill_tools(skills: Rc<[Skill]>) -> [Tool; 2] {
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    let names = json!(names);
    let all = skills.clone();
    let load: Tool = Tool::new(
        LOAD_SKILL,
        "Load a skill: its instructions and the list of its files.",
        move |input: LoadSkill, _| {
            let found = find(&all, &input.name, LOAD_SKILL).map(|skill| {
                let files: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
                let mut loaded =
                    json!({ "name": skill.name, "instructions": skill.instructions, "files": files });
                skill.front.shown(&mut loaded);
                loaded
            });
            async move { found }
        },
    )
    .into();
    let read: Tool = Tool::new(
        READ_SKILL_FILE,
        "Read a file of a skill, whole or a range of its lines (counted from 1).",
        move |input: ReadSkillFile, _| {
            let read = read_file(&skills, &input);
            async move { read }
        },
    )
    .into();
    [load, read].map(|mut tool| {
        tool.input_schema["properties"]["name"]["enum"] = names.clone();
        tool
    })
}

fn find<'a>(skills: &'a [Skill], name: &str, tool: &str) -> Result<&'a Skill, ToolError> {
    skills.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        ToolError::InputInvalid {
            tool: tool.into(),
            reason: format!("there is no skill '{name}' (skills: {})", names.join(", ")),
        }
    })
}

fn read_file(skills: &[Skill], input: &ReadSkillFile) -> Result<Value, ToolError> {
    let invalid = |reason: String| ToolError::InputInvalid {
        tool: READ_SKILL_FILE.into(),
        reason,
    };
    let skill = find(skills, &input.name, READ_SKILL_FILE)?;
    let file = skill
        .files
        .iter()
        .find(|f| f.path == input.path)
        .ok_or_else(|| {
            let paths: Vec<&str> = skill.files.iter().map(|f| f.path.as_str()).collect();
            invalid(format!(
                "skill '{}' has no file '{}' (files: {})",
                skill.name,
                input.path,
                paths.join(", ")
            ))
        })?;
    if input.offset.is_some() || input.length.is_some() {
        return read_bytes(skill, file, input).map_err(invalid);
    }
    let lines: Vec<&str> = file.content.lines().collect();
    let total = lines.len();
    let start = input.start_line.unwrap_or(1);
    let end = input.end_line.unwrap_or(total).min(total);
    if start == 0 || input.end_line == Some(0) {
        return Err(invalid("lines are counted from 1".into()));
    }
    if start > total.max(1) {
        return Err(invalid(format!(
            "startLine {start} is past the end ('{}' has {total} lines)",
            file.path
        )));
    }
    if input.end_line.is_some_and(|e| e < start) {
        return Err(invalid(format!("endLine is before startLine {start}")));
    }
    let content = lines.get(start - 1..end).unwrap_or_default().join("\n");
    Ok(json!({
        "name": skill.name,
        "path": file.path,
        "startLine": start,
        "endLine": end,
        "totalLines": total,
        "content": content,
    }))
}

/// A byte range of `file` (`offset`, at most `length` bytes), moved back to the
/// characters' boundaries so the text stays whole.
fn read_bytes(
    skill: &Skill,
    file: &super::SkillFile,
    input: &ReadSkillFile,
) -> Result<Value, String> {
    if input.start_line.is_some() || input.end_line.is_some() {
        return Err(
            "read lines or bytes, not both: give startLine/endLine or offset/length".into(),
        );
    }
    let text = &file.content;
    let total = text.len();
    let offset = input.offset.unwrap_or(0);
    if offset > total || (offset == total && total > 0) {
        return Err(format!(
            "offset {offset} is past the end ('{}' has {total} bytes)",
            file.path
        ));
    }
    if input.length == Some(0) {
        return Err("length must be at least 1".into());
    }
    let boundary = |mut at: usize| {
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let start = boundary(offset);
    let mut end = boundary(
        input
            .length
            .map_or(total, |n| start.saturating_add(n).min(total)),
    );
    // At least the character at the offset, however short the length.
    while end <= start && end < total {
        end += 1;
        end = (end..=total)
            .find(|&at| text.is_char_boundary(at))
            .unwrap_or(total);
    }
    Ok(json!({
        "name": skill.name,
        "path": file.path,
        "offset": start,
        "length": end - start,
        "totalBytes": total,
        "content": &text[start..end],
    }))
}
