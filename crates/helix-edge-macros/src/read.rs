//! A directory of skills, read at build time: one subdirectory per skill, named as the
//! skill, holding its `SKILL.md` (YAML frontmatter with `name` and `description` between
//! `---` lines, then the instructions) and any other UTF-8 files, which `read_skill_file`
//! reads by their path inside the skill's directory. Hidden files (`.name`) are passed
//! over.
//!
//! ```text
//! skills/
//!   pdf-forms/
//!     SKILL.md
//!     reference/fields.md
//!   release-notes/
//!     SKILL.md
//! ```

use helix_edge_skill_md::{Front, parse};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// A skill as its directory gives it.
#[derive(Debug)]
pub(crate) struct SkillSource {
    pub name: String,
    pub description: String,
    pub instructions: String,
    /// The rest of its frontmatter.
    pub front: Front,
    /// A hash of its content (`SKILL.md` and every file, with their paths).
    pub version: String,
    /// Its `SKILL.md`.
    pub skill_md: PathBuf,
    /// Its other files: the path inside the skill (`/`-separated) and the file.
    pub files: Vec<(String, PathBuf)>,
}

/// The skills of `dir`, sorted by name. A file beside the skill directories, a directory
/// without a `SKILL.md` or a `SKILL.md` naming another skill is an error: a skill left
/// out by mistake would go unnoticed.
pub(crate) fn skills(dir: &Path) -> Result<Vec<SkillSource>, String> {
    let mut skills = Vec::new();
    for entry in visible(dir).map_err(|e| format!("skills directory {}: {e}", dir.display()))? {
        let folder = name_of(&entry);
        if !entry.is_dir() {
            return Err(format!(
                "'{folder}' is a file beside the skill directories (each skill is a directory)"
            ));
        }
        let skill = read_skill(&entry).map_err(|e| format!("skill '{folder}': {e}"))?;
        if skill.name != folder {
            return Err(format!(
                "skill '{folder}': its SKILL.md names it '{}'; it must be the directory's name",
                skill.name
            ));
        }
        skills.push(skill);
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

fn read_skill(dir: &Path) -> Result<SkillSource, String> {
    let skill_md = dir.join("SKILL.md");
    if !skill_md.is_file() {
        return Err("no SKILL.md in its directory".into());
    }
    let text = read_text(&skill_md)?;
    let md = parse(&text)?;
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.retain(|(_, file)| *file != skill_md);
    let mut hash = Sha256::new();
    hash.update(text.as_bytes());
    for (path, file) in &files {
        let content = read_text(file).map_err(|e| format!("file '{path}': {e}"))?;
        hash.update([0]);
        hash.update(path.as_bytes());
        hash.update([0]);
        hash.update(content.as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(SkillSource {
        name: md.name,
        description: md.description,
        instructions: md.instructions,
        front: md.front,
        version: format!("sha256:{hex}"),
        skill_md,
        files,
    })
}
/// Every visible file under `dir`, depth first in name order, with its path from `root`.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    for entry in visible(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        if entry.is_dir() {
            collect(root, &entry, out)?;
            continue;
        }
        let inside = entry.strip_prefix(root).unwrap_or(&entry);
        let path = inside
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        out.push((path, entry));
    }
    Ok(())
}

/// The entries of `dir` that are not hidden, in name order.
fn visible(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.retain(|p| !name_of(p).starts_with('.'));
    entries.sort();
    Ok(entries)
}

fn read_text(path: &Path) -> Result<String, String> {
    let bytes = fs::read(path).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A fresh directory under the target's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("helix-skills-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(path: PathBuf, content: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    #[test]
    fn a_directory_of_skills() {
        let dir = scratch("ok");
        write(
            dir.join("b-skill/SKILL.md"),
            b"---\nname: b-skill\ndescription: B\n---\nDo B.\n",
        );
        write(dir.join("b-skill/ref/x.md"), b"x");
        write(dir.join("b-skill/.DS_Store"), b"\xff");
        write(
            dir.join("a-skill/SKILL.md"),
            b"---\nname: a-skill\ndescription: A\n---\nDo A.",
        );
        let skills = skills(&dir).unwrap();
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a-skill", "b-skill"]);
        let files: Vec<_> = skills[1].files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(files, ["ref/x.md"]);
        assert_eq!(skills[1].instructions, "Do B.");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_malformed_directory_is_refused() {
        type Files<'a> = &'a [(&'a str, &'a [u8])];
        let cases: [(&str, Files, &str); 4] = [
            (
                "stray",
                &[("notes.md", b"x")],
                "'notes.md' is a file beside",
            ),
            ("nomd", &[("a/README.md", b"x")], "skill 'a': no SKILL.md"),
            (
                "renamed",
                &[("a/SKILL.md", b"---\nname: b\ndescription: d\n---\ni")],
                "names it 'b'",
            ),
            (
                "binary",
                &[
                    ("a/SKILL.md", b"---\nname: a\ndescription: d\n---\ni"),
                    ("a/x.bin", b"\xff"),
                ],
                "skill 'a': file 'x.bin': not UTF-8",
            ),
        ];
        for (name, files, expected) in cases {
            let dir = scratch(name);
            for (path, content) in files {
                write(dir.join(path), content);
            }
            let err = skills(&dir).unwrap_err();
            assert!(err.contains(expected), "{name}: {err}");
            fs::remove_dir_all(dir).unwrap();
        }
        let missing = skills(Path::new("/nonexistent/skills")).unwrap_err();
        assert!(
            missing.starts_with("skills directory /nonexistent/skills"),
            "{missing}"
        );
    }
}
