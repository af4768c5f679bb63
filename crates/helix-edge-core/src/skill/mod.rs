//! Skills: instructions for particular tasks that an agent loads when a task needs one,
//! instead of carrying them all in its system prompt (the Helix core API's skills).
//!
//! An agent gets skills with [`AgentBuilder::skills`]; their catalog (names and
//! descriptions) is appended to its system prompt, and two tools are added: `load_skill`
//! (a skill's instructions and the list of its files) and `read_skill_file` (one file,
//! or a 1-indexed range of its lines). [`AgentBuilder::preload_skills`] puts skills'
//! instructions in the system prompt from the start. Both tool names are reserved.
//!
//! Skills are defined in code ([`Skill::new`], [`Skill::file`]) or read from a directory
//! when the worker compiles ([`skills_dir!`](crate::skills_dir)): one directory per
//! skill, with its `SKILL.md` (YAML frontmatter with `name` and `description`, then the
//! instructions) and any other files.
//!
//! Where skills come from is a [`SkillProvider`]: the skills of the worker's build (a
//! `Vec<Skill>`: their catalog is part of the system prompt from the start) or, with the
//! feature `skill-store`, `StoredSkills` over an R2 bucket or a KV namespace (listed
//! as each run starts, loaded and read when the model asks: `provider`, `stored`,
//! `run`), given with [`AgentBuilder::skill_provider`].
//!
//! A loaded skill lives in the transcript (the `load_skill` result), so it survives
//! suspension, eviction and restarts like every message; [`loaded`] reads back which
//! skills a session has loaded.
//!
//! [`AgentBuilder::skills`]: crate::agent::AgentBuilder::skills
//! [`AgentBuilder::preload_skills`]: crate::agent::AgentBuilder::preload_skills
//! [`AgentBuilder::skill_provider`]: crate::agent::AgentBuilder::skill_provider

mod builder;
mod front;
mod provider;
mod run;
#[cfg(feature = "skill-store")]
mod stored;
mod tools;

pub use crate::objects::FileBytes;
pub use front::{Frontmatter, MAX_COMPATIBILITY};
pub use provider::{Catalog, Loaded, SkillProvider};
#[cfg(feature = "skill-store")]
pub use stored::StoredSkills;

#[doc(hidden)]
pub use helix_edge_macros::__skills_dir;
pub(crate) use tools::{catalog, skill_tools};

use crate::message::Message;
use serde_json::Value;

/// The tool that loads a skill's instructions.
pub const LOAD_SKILL: &str = "load_skill";
/// The tool that reads a skill's file.
pub const READ_SKILL_FILE: &str = "read_skill_file";
/// The longest skill name.
pub const MAX_NAME: usize = 64;
/// The longest skill description.
pub const MAX_DESCRIPTION: usize = 1024;

/// The skills in a directory, read when the worker compiles: `skills_dir!("skills")` is
/// a `Vec<Skill>`, sorted by name. The path is relative to the crate's directory
/// (`Cargo.toml`'s). Each subdirectory is a skill named as the directory, with its
/// `SKILL.md` (YAML frontmatter with `name` and `description` between `---` lines, then
/// the instructions) and any other UTF-8 files, read with `read_skill_file` by their path
/// inside the skill's directory; hidden files are passed over.
///
/// ```text
/// skills/
///   pdf-forms/
///     SKILL.md
///     reference/fields.md
///   release-notes/
///     SKILL.md
/// ```
///
/// A file beside the skill directories, a directory without a `SKILL.md`, frontmatter
/// that is not YAML or lacks a field, a `SKILL.md` naming another skill and a file that
/// is not UTF-8 are compile errors; the rules on names and descriptions are checked when
/// the agent is built, as for skills defined in code. The worker rebuilds when a file it
/// embeds changes; a file added to the directory is seen on the next build that
/// recompiles the crate.
#[macro_export]
macro_rules! skills_dir {
    ($path:literal) => {
        $crate::skill::__skills_dir!($crate, $path)
    };
}

/// A skill: a name, a description the model chooses it by, instructions, and files the
/// instructions may point to.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    name: String,
    description: String,
    instructions: String,
    files: Vec<SkillFile>,
    front: Frontmatter,
}

/// A file of a skill, by its path relative to the skill (`reference/forms.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    /// The path.
    pub path: String,
    /// The text.
    pub content: String,
}

/// Why a skill is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("skill '{skill}': {reason}")]
pub struct SkillError {
    /// The skill (its name, or where it came from).
    pub skill: String,
    /// What is wrong.
    pub reason: String,
}

impl Skill {
    /// A skill defined in code. It is checked when the agent is built.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        instructions: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            instructions: instructions.into(),
            files: Vec::new(),
            front: Frontmatter::default(),
        }
    }

    /// Adds a file (`read_skill_file` reads it by `path`).
    pub fn file(mut self, path: impl Into<String>, content: impl Into<String>) -> Self {
        self.files.push(SkillFile {
            path: path.into(),
            content: content.into(),
        });
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its instructions.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// Its files.
    pub fn files(&self) -> &[SkillFile] {
        &self.files
    }

    /// Checks the rules: a name of 1–64 lowercase letters, digits and single hyphens
    /// (not first or last), a description of 1–1024 characters, instructions, and file
    /// paths that are relative, without `..`, and given once.
    pub fn check(&self) -> Result<(), SkillError> {
        let fail = |reason: String| {
            Err(SkillError {
                skill: self.name.clone(),
                reason,
            })
        };
        if let Err(reason) = check_name(&self.name) {
            return fail(reason);
        }
        let described = self.description.trim();
        if described.is_empty() || self.description.chars().count() > MAX_DESCRIPTION {
            return fail(format!(
                "the description must be 1-{MAX_DESCRIPTION} characters"
            ));
        }
        if self.instructions.trim().is_empty() {
            return fail("the instructions are empty".into());
        }
        if let Err(reason) = self.front.check() {
            return fail(reason);
        }
        for (i, file) in self.files.iter().enumerate() {
            let path = &file.path;
            let bad = path.is_empty()
                || path.starts_with('/')
                || path
                    .split('/')
                    .any(|s| s.is_empty() || s == "." || s == "..");
            if bad {
                return fail(format!(
                    "file path '{path}' must be relative, without empty, '.' or '..' segments"
                ));
            }
            if self.files[..i].iter().any(|f| f.path == *path) {
                return fail(format!("file '{path}' is given twice"));
            }
        }
        Ok(())
    }
}

/// Checks a skill name: 1–64 characters of `a-z`, `0-9` and `-`, no hyphen first, last
/// or next to another.
pub fn check_name(name: &str) -> Result<(), String> {
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if name.is_empty() || name.len() > MAX_NAME || !chars_ok {
        return Err(format!(
            "the name must be 1-{MAX_NAME} characters of a-z, 0-9 and '-'"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err("the name's hyphens must be single and inside it".into());
    }
    Ok(())
}

/// The skills a session has loaded, in the order it loaded them (each once): the
/// successful `load_skill` results in its transcript.
pub fn loaded(messages: &[Message]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (name, _) in load_results(messages) {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// The successful `load_skill` results in `messages`, in order: the skill's name and the
/// whole result.
pub(crate) fn load_results(messages: &[Message]) -> impl Iterator<Item = (&str, &Value)> {
    messages.iter().filter_map(|message| match message {
        Message::Tool {
            tool_name,
            content,
            is_error: false,
            ..
        } if tool_name == LOAD_SKILL => Some((content.get("name")?.as_str()?, content)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        for good in ["pdf", "pdf-forms", "a1-b2-c3", &"x".repeat(64)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "PDF",
            "pdf_forms",
            "pdf forms",
            "-pdf",
            "pdf-",
            "pdf--forms",
            "é",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn descriptions_instructions_and_files_are_checked() {
        let ok = Skill::new("s", "d", "i").file("a/b.md", "x");
        assert_eq!(ok.check(), Ok(()));
        let long = Skill::new("s", "d".repeat(1025), "i");
        assert!(long.check().unwrap_err().reason.contains("description"));
        assert!(Skill::new("s", "d".repeat(1024), "i").check().is_ok());
        assert!(Skill::new("s", " ", "i").check().is_err());
        assert!(Skill::new("s", "d", "\n").check().is_err());
        for path in ["", "/abs", "a/../b", "./a", "a//b"] {
            let err = Skill::new("s", "d", "i")
                .file(path, "x")
                .check()
                .unwrap_err();
            assert!(err.reason.contains("relative"), "{path}: {err}");
        }
        let twice = Skill::new("s", "d", "i").file("a", "1").file("a", "2");
        assert!(twice.check().unwrap_err().reason.contains("twice"));
    }
}
