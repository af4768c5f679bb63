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

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

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
    let (name, description, instructions, front) = parse(&text)?;
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
        name,
        description,
        instructions,
        front,
        version: format!("sha256:{hex}"),
        skill_md,
        files,
    })
}

/// The frontmatter's optional fields (the Agent Skills specification's).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Front {
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: Vec<(String, String)>,
    pub allowed_tools: Option<Vec<String>>,
}

/// The fields a frontmatter may have.
const FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

fn front_of(front: &Yaml) -> Result<Front, String> {
    let Yaml::Hash(map) = front else {
        return Err("the frontmatter must be a map".into());
    };
    for key in map.keys() {
        match key {
            Yaml::String(key) if FIELDS.contains(&key.as_str()) => {}
            other => {
                return Err(format!(
                    "the frontmatter has {}, which a SKILL.md does not define (it has {})",
                    shown(other),
                    FIELDS.join(", ")
                ));
            }
        }
    }
    let text = |key: &str| match &front[key] {
        Yaml::BadValue => Ok(None),
        Yaml::String(value) => Ok(Some(value.trim().to_string())),
        _ => Err(format!("the frontmatter's '{key}' must be text")),
    };
    let metadata = match &front["metadata"] {
        Yaml::BadValue => Vec::new(),
        Yaml::Hash(entries) => entries
            .iter()
            .map(|(k, v)| match (k, v) {
                (Yaml::String(k), Yaml::String(v)) => Ok((k.clone(), v.clone())),
                _ => Err(format!(
                    "the frontmatter's metadata maps text to text, not {} to {}",
                    shown(k),
                    shown(v)
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("the frontmatter's 'metadata' must be a map of text to text".into()),
    };
    let allowed_tools = match &front["allowed-tools"] {
        Yaml::BadValue => None,
        Yaml::String(list) => Some(list.split_whitespace().map(String::from).collect()),
        Yaml::Array(list) => Some(
            list.iter()
                .map(|t| match t {
                    Yaml::String(t) => Ok(t.clone()),
                    other => Err(format!(
                        "allowed-tools lists tool names, not {}",
                        shown(other)
                    )),
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => return Err("the frontmatter's 'allowed-tools' must be a space-separated list".into()),
    };
    Ok(Front {
        license: text("license")?,
        compatibility: text("compatibility")?,
        metadata,
        allowed_tools,
    })
}

/// A YAML value as an error names it.
fn shown(value: &Yaml) -> String {
    match value {
        Yaml::String(s) => format!("'{s}'"),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".into(),
        Yaml::Array(_) => "a list".into(),
        Yaml::Hash(_) => "a map".into(),
        _ => "a value".into(),
    }
}

/// The name, description, instructions and other fields of a `SKILL.md`.
pub(crate) fn parse(text: &str) -> Result<(String, String, String, Front), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("SKILL.md must start with a '---' line (YAML frontmatter)".into());
    }
    let start = text.len() - lines.clone().map(str::len).sum::<usize>();
    let mut end = start;
    let body = loop {
        let Some(line) = lines.next() else {
            return Err("the frontmatter has no closing '---' line".into());
        };
        if line.trim_end() == "---" {
            break &text[end + line.len()..];
        }
        end += line.len();
    };
    let docs = YamlLoader::load_from_str(&text[start..end])
        .map_err(|e| format!("the frontmatter is not YAML: {e}"))?;
    let front = docs.first().unwrap_or(&Yaml::Null);
    if !matches!(front, Yaml::Hash(_)) {
        return Err("the frontmatter must be a map with 'name' and 'description'".into());
    }
    let field = |key: &str| match &front[key] {
        Yaml::String(value) => Ok(value.trim().to_string()),
        Yaml::BadValue => Err(format!("the frontmatter has no '{key}'")),
        _ => Err(format!("the frontmatter's '{key}' must be text")),
    };
    Ok((
        field("name")?,
        field("description")?,
        body.trim().to_string(),
        front_of(front)?,
    ))
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

    fn text(name: &str, description: &str, instructions: &str) -> (String, String, String) {
        (name.into(), description.into(), instructions.into())
    }

    fn parsed(md: &str) -> (String, String, String) {
        let (name, description, instructions, _) = parse(md).unwrap();
        (name, description, instructions)
    }

    #[test]
    fn frontmatter_is_yaml() {
        let md = "---\nname: pdf-forms\ndescription: Fill in PDF forms. Use it for forms.\n---\n# PDF\nbody\n";
        assert_eq!(
            parsed(md),
            text(
                "pdf-forms",
                "Fill in PDF forms. Use it for forms.",
                "# PDF\nbody"
            )
        );
        let md = "\u{feff}---\r\nname: 'a'\r\ndescription: \"say \\\"hi\\\": now\"\r\n---\r\nx";
        assert_eq!(parsed(md), text("a", "say \"hi\": now", "x"));
        let md = "---\nname: a\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n\
                  description: >\n  One line\n  and more.\n\n  Second.\nallowed-tools: [Bash]\n---\nbody";
        assert_eq!(parsed(md), text("a", "One line and more.\nSecond.", "body"));
        let (.., front) = parse(md).unwrap();
        assert_eq!(
            front,
            Front {
                license: Some("MIT".into()),
                compatibility: None,
                metadata: vec![("version".into(), "1.0".into())],
                allowed_tools: Some(vec!["Bash".into()]),
            }
        );
        let md = "---\nname: a\ndescription: d\ncompatibility: Needs git\nallowed-tools: add_note  search\n---\nb";
        let (.., front) = parse(md).unwrap();
        assert_eq!(front.compatibility.as_deref(), Some("Needs git"));
        assert_eq!(
            front.allowed_tools,
            Some(vec!["add_note".into(), "search".into()])
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            ("name: a\n", "must start"),
            ("---\nname: a\ndescription: d\n", "closing"),
            ("---\ndescription: d\n---\n", "no 'name'"),
            ("---\nname: a\n---\n", "no 'description'"),
            (
                "---\nname: [a]\ndescription: d\n---\n",
                "'name' must be text",
            ),
            ("---\nname: \"a\ndescription: d\n---\n", "not YAML"),
            ("---\n- a\n---\n", "must be a map"),
            ("---\n---\n", "must be a map"),
            (
                "---\nname: a\ndescription: d\nauthor: me\n---\n",
                "has 'author', which a SKILL.md does not define",
            ),
            (
                "---\nname: a\ndescription: d\nmetadata:\n  n: 1\n---\n",
                "maps text to text, not 'n' to 1",
            ),
            (
                "---\nname: a\ndescription: d\nmetadata: x\n---\n",
                "'metadata' must be a map",
            ),
            (
                "---\nname: a\ndescription: d\nlicense: [MIT]\n---\n",
                "'license' must be text",
            ),
            (
                "---\nname: a\ndescription: d\nallowed-tools: [1]\n---\n",
                "lists tool names, not 1",
            ),
        ];
        for (md, expected) in cases {
            let err = parse(md).unwrap_err();
            assert!(err.contains(expected), "{md:?}: {err}");
        }
    }

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
