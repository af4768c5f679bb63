//! Skills kept in a store the worker reads at run time — an R2 bucket or a KV namespace
//! (the platform's adapters implement [`ObjectStore`]) — laid out as a directory of
//! skills under a prefix: `{prefix}{skill}/SKILL.md` and the skill's other files beside
//! it. Edit a skill in the store and the next run sees it: each run lists the skills as
//! it starts, `load_skill` reads the `SKILL.md` as it is then (its version, a hash of
//! it, is recorded with the result) and `read_skill_file` reads a file only when asked,
//! a byte range of it when the model asks for one.

use super::provider::{Catalog, Loaded, SkillProvider};
use super::{Skill, SkillError, check_name};
use crate::objects::{FileBytes, ObjectStore};
use futures::future::{LocalBoxFuture, join_all};
use sha2::{Digest, Sha256};
use std::ops::Range;

/// The file of a skill that defines it.
const SKILL_MD: &str = "SKILL.md";

/// The skills under a prefix of a [`ObjectStore`], read when a run needs them.
#[derive(Debug, Clone)]
pub struct StoredSkills<S> {
    store: S,
    prefix: String,
}

impl<S: ObjectStore> StoredSkills<S> {
    /// The skills under `prefix` in `store` (`"skills/"`: `skills/pdf-forms/SKILL.md`
    /// is skill `pdf-forms`); `""` for the whole store. A prefix that does not end with
    /// `/` gets one.
    pub fn new(store: S, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        Self { store, prefix }
    }

    fn failed(&self, skill: &str, reason: String) -> SkillError {
        SkillError {
            skill: skill.into(),
            reason: format!("reading {}{skill}: {reason}", self.prefix),
        }
    }

    /// Skill `name`'s `SKILL.md`, read and checked; `None` when it has none.
    async fn skill_md(&self, name: &str) -> Result<Option<Skill>, SkillError> {
        let key = format!("{}{name}/{SKILL_MD}", self.prefix);
        let Some(md) = self
            .store
            .get(&key, None)
            .await
            .map_err(|e| self.failed(name, e))?
        else {
            return Ok(None);
        };
        skill_of(name, &md.bytes).map(Some)
    }
}

impl<S: ObjectStore> SkillProvider for StoredSkills<S> {
    fn catalog(&self) -> LocalBoxFuture<'_, Result<Catalog, SkillError>> {
        Box::pin(async move {
            let keys = self
                .store
                .keys(&self.prefix)
                .await
                .map_err(|e| self.failed("", e))?;
            let mut names: Vec<&str> = keys
                .iter()
                .filter_map(|key| key.strip_prefix(&self.prefix)?.strip_suffix(SKILL_MD))
                .filter_map(|dir| dir.strip_suffix('/'))
                .filter(|dir| !dir.is_empty() && !dir.contains('/'))
                .collect();
            names.sort_unstable();
            let read = join_all(names.iter().map(|name| self.skill_md(name))).await;
            let mut catalog = Catalog::default();
            for (name, skill) in names.iter().zip(read) {
                match skill {
                    Ok(Some(skill)) => catalog.skills.push(skill),
                    Ok(None) => {} // removed since the listing
                    Err(problem) => catalog.problems.push(SkillError {
                        skill: (*name).into(),
                        reason: problem.reason,
                    }),
                }
            }
            Ok(catalog)
        })
    }

    fn load<'a>(&'a self, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Loaded>, SkillError>> {
        Box::pin(async move {
            if check_name(name).is_err() {
                return Ok(None);
            }
            let Some(skill) = self.skill_md(name).await? else {
                return Ok(None);
            };
            let dir = format!("{}{name}/", self.prefix);
            let keys = self
                .store
                .keys(&dir)
                .await
                .map_err(|e| self.failed(name, e))?;
            let mut files: Vec<String> = keys
                .iter()
                .filter_map(|key| key.strip_prefix(&dir))
                .filter(|path| *path != SKILL_MD && valid_path(path))
                .map(String::from)
                .collect();
            files.sort_unstable();
            Ok(Some(Loaded { skill, files }))
        })
    }

    fn read<'a>(
        &'a self,
        name: &'a str,
        path: &'a str,
        range: Option<Range<u64>>,
    ) -> LocalBoxFuture<'a, Result<Option<FileBytes>, SkillError>> {
        Box::pin(async move {
            if check_name(name).is_err() || !valid_path(path) || path == SKILL_MD {
                return Ok(None);
            }
            let key = format!("{}{name}/{path}", self.prefix);
            self.store
                .get(&key, range)
                .await
                .map_err(|e| self.failed(name, e))
        })
    }
}

/// Whether `path` is a file path inside a skill: relative, without empty, `.` or `..`
/// segments, and not hidden.
fn valid_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != ".." && !s.starts_with('.'))
}

/// The skill in directory `dir` whose `SKILL.md` is `md`: parsed, named as its
/// directory, checked, its version a hash of the `SKILL.md`.
pub(crate) fn skill_of(dir: &str, md: &[u8]) -> Result<Skill, SkillError> {
    let fail = |reason: String| SkillError {
        skill: dir.into(),
        reason,
    };
    let text = std::str::from_utf8(md).map_err(|_| fail("its SKILL.md is not UTF-8".into()))?;
    let parsed = helix_edge_skill_md::parse(text).map_err(fail)?;
    if parsed.name != dir {
        return Err(fail(format!(
            "its SKILL.md names it '{}'; it must be the directory's name",
            parsed.name
        )));
    }
    let digest = Sha256::digest(md);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let front = parsed.front;
    let mut skill = Skill::new(parsed.name, parsed.description, parsed.instructions)
        .version(format!("sha256:{hex}"));
    skill.front.license = front.license;
    skill.front.compatibility = front.compatibility;
    skill.front.metadata = front.metadata;
    skill.front.allowed_tools = front.allowed_tools;
    skill.check()?;
    Ok(skill)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::MemoryObjects;
    use futures::executor::block_on;

    fn md(name: &str, description: &str) -> String {
        format!(
            "---\nname: {name}\ndescription: {description}\nallowed-tools: add_note\n---\nDo {name}.\n"
        )
    }

    #[test]
    fn skills_are_read_from_the_store_when_asked() {
        let memory = MemoryObjects::default();
        memory.put("skills/b-skill/SKILL.md", &md("b-skill", "B"));
        memory.put("skills/a-skill/SKILL.md", &md("a-skill", "A"));
        memory.put("skills/a-skill/ref/notes.md", "notes");
        memory.put("skills/a-skill/.hidden", "x");
        memory.put("skills/wrong/SKILL.md", &md("other", "W"));
        memory.put("skills/broken/SKILL.md", "no frontmatter");
        memory.put("skills/loose.md", "x");
        memory.put("other/c-skill/SKILL.md", &md("c-skill", "C"));
        let skills = StoredSkills::new(memory.clone(), "skills");

        let catalog = block_on(skills.catalog()).unwrap();
        let names: Vec<&str> = catalog.skills.iter().map(Skill::name).collect();
        assert_eq!(names, ["a-skill", "b-skill"]);
        let a = &catalog.skills[0];
        assert_eq!(a.instructions(), "Do a-skill.");
        assert_eq!(a.frontmatter().allowed_tools, Some(vec!["add_note".into()]));
        let version = a.frontmatter().version.clone().unwrap();
        assert!(
            version.starts_with("sha256:") && version.len() == 23,
            "{version}"
        );
        let problems: Vec<(&str, &str)> = catalog
            .problems
            .iter()
            .map(|p| (p.skill.as_str(), p.reason.as_str()))
            .collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].0 == "broken" && problems[0].1.contains("must start"));
        assert!(problems[1].0 == "wrong" && problems[1].1.contains("names it 'other'"));

        let loaded = block_on(skills.load("a-skill")).unwrap().unwrap();
        assert_eq!(loaded.files, ["ref/notes.md"]);
        assert_eq!(block_on(skills.load("c-skill")).unwrap(), None);
        assert_eq!(block_on(skills.load("../other/c-skill")).unwrap(), None);

        let read = block_on(skills.read("a-skill", "ref/notes.md", Some(1..3)));
        let read = read.unwrap().unwrap();
        assert_eq!(
            (read.bytes.as_slice(), read.offset, read.total),
            (&b"ot"[..], 1, 5)
        );
        for path in [
            "../b-skill/SKILL.md",
            ".hidden",
            "SKILL.md",
            "ref//notes.md",
        ] {
            assert_eq!(
                block_on(skills.read("a-skill", path, None)).unwrap(),
                None,
                "{path}"
            );
        }

        // An edit is seen by the next read, with a new version.
        memory.put("skills/a-skill/SKILL.md", &md("a-skill", "A, edited"));
        let edited = block_on(skills.load("a-skill")).unwrap().unwrap();
        assert_eq!(edited.skill.description(), "A, edited");
        assert_ne!(edited.skill.frontmatter().version.as_ref(), Some(&version));
    }
}
