//! The `SKILL.md` of an Agent Skill: YAML frontmatter between `---` lines (`name`,
//! `description` and the specification's optional `license`, `compatibility`,
//! `metadata` and `allowed-tools`; any other key is refused), then the instructions.
//!
//! One parser for both places helix-edge reads skills: `skills_dir!` when the worker
//! compiles, and skill providers (R2, KV, D1) when a run lists and loads them.

use yaml_rust2::{Yaml, YamlLoader};

/// The frontmatter's optional fields (the Agent Skills specification's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Front {
    /// `license`: a name, or a file of the skill.
    pub license: Option<String>,
    /// `compatibility`: what the skill needs of its environment.
    pub compatibility: Option<String>,
    /// `metadata`: text keys and values, in the order given.
    pub metadata: Vec<(String, String)>,
    /// `allowed-tools`: the tools the skill may use, if it says.
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

/// A `SKILL.md`, read.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// The text after the frontmatter, trimmed.
    pub instructions: String,
    /// The optional fields.
    pub front: Front,
}

/// The name, description, instructions and other fields of a `SKILL.md`, or what is
/// wrong with it.
pub fn parse(text: &str) -> Result<SkillMd, String> {
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
    Ok(SkillMd {
        name: field("name")?,
        description: field("description")?,
        instructions: body.trim().to_string(),
        front: front_of(front)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(name: &str, description: &str, instructions: &str) -> (String, String, String) {
        (name.into(), description.into(), instructions.into())
    }

    fn parsed(md: &str) -> (String, String, String) {
        let md = parse(md).unwrap();
        (md.name, md.description, md.instructions)
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
        let front = parse(md).unwrap().front;
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
        let front = parse(md).unwrap().front;
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
}
