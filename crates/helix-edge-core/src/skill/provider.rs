//! Where an agent's skills come from: a [`SkillProvider`] lists them when a run starts,
//! loads one when the model calls `load_skill` and reads a file of one when it calls
//! `read_skill_file`. The skills of the worker's build (a `Vec<Skill>`, from
//! [`skills_dir!`](crate::skills_dir) or [`Skill::new`]) are one provider;
//! [`StoredSkills`](super::StoredSkills) over an R2 bucket or a KV namespace is another,
//! whose skills change without a deploy.

use super::{Skill, SkillError};
use crate::objects::FileBytes;
use futures::future::{LocalBoxFuture, ready};

/// Where an agent's skills come from (see [`AgentBuilder::skill_provider`]).
///
/// [`AgentBuilder::skill_provider`]: crate::agent::AgentBuilder::skill_provider
pub trait SkillProvider {
    /// The skills a run can load, as it starts: each one's `SKILL.md` read (name,
    /// description, frontmatter, instructions, version), its files not. A skill that
    /// cannot be read is left out and named in [`Catalog::problems`].
    fn catalog(&self) -> LocalBoxFuture<'_, Result<Catalog, SkillError>>;

    /// The skill `name` as it is now, with the paths of its files; `None` when there is
    /// no such skill.
    fn load<'a>(&'a self, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Loaded>, SkillError>>;

    /// A file of skill `name`: whole, or the bytes of `range` (clipped to the file);
    /// `None` when the skill or the file does not exist.
    fn read<'a>(
        &'a self,
        name: &'a str,
        path: &'a str,
        range: Option<std::ops::Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, SkillError>>;

    /// The skills, when they are fixed when the worker is built (they are then checked
    /// when the agent is built, and their catalog is part of its system prompt).
    fn fixed(&self) -> Option<&[Skill]> {
        None
    }
}

/// The skills a provider lists.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The skills, sorted by name, their files not listed.
    pub skills: Vec<Skill>,
    /// The skills left out, and why (each is logged when a run lists them).
    pub problems: Vec<SkillError>,
}

/// A skill as `load_skill` gives it: its `SKILL.md`, and the paths of its files.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The skill (its [`files`](Skill::files) may be empty: they are read on demand).
    pub skill: Skill,
    /// The paths of its files, sorted.
    pub files: Vec<String>,
}

impl SkillProvider for Vec<Skill> {
    fn catalog(&self) -> LocalBoxFuture<'_, Result<Catalog, SkillError>> {
        let mut skills = self.clone();
        for skill in &mut skills {
            skill.files.clear();
        }
        Box::pin(ready(Ok(Catalog {
            skills,
            problems: Vec::new(),
        })))
    }

    fn load<'a>(&'a self, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Loaded>, SkillError>> {
        let found = self.iter().find(|s| s.name == name).map(|skill| Loaded {
            files: skill.files.iter().map(|f| f.path.clone()).collect(),
            skill: skill.clone(),
        });
        Box::pin(ready(Ok(found)))
    }

    fn read<'a>(
        &'a self,
        name: &'a str,
        path: &'a str,
        range: Option<std::ops::Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, SkillError>> {
        let file = self
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.files.iter().find(|f| f.path == path));
        Box::pin(ready(Ok(
            file.map(|f| FileBytes::of(f.content.as_bytes(), range))
        )))
    }

    fn fixed(&self) -> Option<&[Skill]> {
        Some(self)
    }
}
