//! Skills embedded at build time from a directory: one subdirectory per skill, named as
//! the skill, holding its `SKILL.md` and any other files (text, read with
//! `read_skill_file` by their path inside the skill's directory).
//!
//! ```text
//! skills/
//!   pdf-forms/
//!     SKILL.md
//!     reference/fields.md
//!   release-notes/
//!     SKILL.md
//! ```

use super::{Skill, SkillError};
use include_dir::{Dir, DirEntry};

/// Embeds a directory of skills in the worker at build time and reads it (see
/// [`from_dir`]): `helix_edge::skills_dir!("$CARGO_MANIFEST_DIR/skills")` is a
/// `Result<Vec<Skill>, SkillError>`. The path is as `include_dir!` takes it
/// (`$CARGO_MANIFEST_DIR` is the crate's directory); a change in the directory rebuilds.
#[macro_export]
macro_rules! skills_dir {
    ($path:tt) => {{
        use $crate::skill::include_dir;
        static SKILLS: include_dir::Dir<'static> = include_dir::include_dir!($path);
        $crate::skill::from_dir(&SKILLS)
    }};
}

/// The skills of `dir`, sorted by name: each subdirectory with a `SKILL.md` is a skill
/// whose name must be the subdirectory's; its other files are the skill's files. Files
/// must be UTF-8 text. Subdirectories without a `SKILL.md` and files at the top are an
/// error (a skill left out by mistake would go unnoticed).
pub fn from_dir(dir: &Dir<'_>) -> Result<Vec<Skill>, SkillError> {
    let mut skills = Vec::new();
    for entry in dir.entries() {
        let DirEntry::Dir(sub) = entry else {
            return Err(SkillError {
                skill: entry.path().display().to_string(),
                reason: "a file beside the skill directories (each skill is a directory)".into(),
            });
        };
        skills.push(read_skill(sub)?);
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

fn read_skill(dir: &Dir<'_>) -> Result<Skill, SkillError> {
    let folder = dir
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fail = |reason: String| SkillError {
        skill: folder.clone(),
        reason,
    };
    let md = dir
        .entries()
        .iter()
        .find_map(|e| {
            e.as_file()
                .filter(|f| f.path().file_name() == Some("SKILL.md".as_ref()))
        })
        .ok_or_else(|| fail("no SKILL.md in the skill's directory".into()))?;
    let text = md
        .contents_utf8()
        .ok_or_else(|| fail("SKILL.md is not UTF-8 text".into()))?;
    let mut skill = Skill::parse(text).map_err(|e| fail(e.reason))?;
    if skill.name != folder {
        return Err(fail(format!(
            "SKILL.md names the skill '{}': it must be the directory's name",
            skill.name
        )));
    }
    let mut files = Vec::new();
    collect(dir, &mut files);
    for file in files {
        if file.path() == md.path() {
            continue;
        }
        let inside = file.path().strip_prefix(dir.path()).unwrap_or(file.path());
        let path = inside
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let content = file
            .contents_utf8()
            .ok_or_else(|| fail(format!("file '{path}' is not UTF-8 text")))?;
        skill = skill.file(path, content);
    }
    skill.check().map_err(|e| fail(e.reason))?;
    Ok(skill)
}

/// Every file under `dir`, depth first.
fn collect<'a>(dir: &'a Dir<'a>, out: &mut Vec<&'a include_dir::File<'a>>) {
    for entry in dir.entries() {
        match entry {
            DirEntry::File(file) => out.push(file),
            DirEntry::Dir(sub) => collect(sub, out),
        }
    }
}
