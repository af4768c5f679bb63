//! A skill's frontmatter beyond its name and description, as the Agent Skills
//! specification defines it: `license`, `compatibility` (at most 500 characters),
//! `metadata` (text keys and values) and `allowed-tools` (the tools the skill may use:
//! while it is loaded, the run calls no others), plus the skill's `version` (what the
//! run loaded is recorded with the `load_skill` result). All are kept, checked when the
//! agent is built, and given to the model with the skill's instructions.

use super::Skill;
use serde_json::{Map, Value, json};

/// The longest `compatibility`.
pub const MAX_COMPATIBILITY: usize = 500;

/// The optional fields of a skill's frontmatter, and its version.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frontmatter {
    /// Its license: a name, or a file of the skill.
    pub license: Option<String>,
    /// What it needs of its environment.
    pub compatibility: Option<String>,
    /// Free text keys and values, in the order given.
    pub metadata: Vec<(String, String)>,
    /// The tools it may use, if it says.
    pub allowed_tools: Option<Vec<String>>,
    /// Its version (a content hash for a skill read at build time).
    pub version: Option<String>,
}

impl Skill {
    /// Its license (a name such as `MIT`, or a file of the skill).
    pub fn license(mut self, license: impl Into<String>) -> Self {
        self.front.license = Some(license.into());
        self
    }

    /// What it needs of its environment (at most 500 characters).
    pub fn compatibility(mut self, compatibility: impl Into<String>) -> Self {
        self.front.compatibility = Some(compatibility.into());
        self
    }

    /// A metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.front.metadata.push((key.into(), value.into()));
        self
    }

    /// The tools it may use: while it is loaded, a call of any other tool of the agent
    /// fails with `tool_not_allowed` (the skill tools and the output stay allowed).
    pub fn allowed_tools<N: Into<String>>(mut self, tools: impl IntoIterator<Item = N>) -> Self {
        self.front.allowed_tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Its version, recorded with each `load_skill` result.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.front.version = Some(version.into());
        self
    }

    /// Its frontmatter beyond name and description.
    pub fn frontmatter(&self) -> &Frontmatter {
        &self.front
    }
}

impl Frontmatter {
    /// What is wrong with it, if anything.
    pub(super) fn check(&self) -> Result<(), String> {
        let blank = |v: &Option<String>| v.as_deref().is_some_and(|t| t.trim().is_empty());
        if blank(&self.license) {
            return Err("the license is blank".into());
        }
        if blank(&self.compatibility)
            || self
                .compatibility
                .as_deref()
                .is_some_and(|c| c.chars().count() > MAX_COMPATIBILITY)
        {
            return Err(format!(
                "the compatibility must be 1-{MAX_COMPATIBILITY} characters"
            ));
        }
        for (i, (key, _)) in self.metadata.iter().enumerate() {
            if key.trim().is_empty() {
                return Err("a metadata key is blank".into());
            }
            if self.metadata[..i].iter().any(|(k, _)| k == key) {
                return Err(format!("the metadata key '{key}' is given twice"));
            }
        }
        for (i, tool) in self.allowed_tools.iter().flatten().enumerate() {
            if !crate::tool::valid_name(tool) {
                return Err(format!("allowed tool '{tool}' is not a tool name"));
            }
            if self
                .allowed_tools
                .iter()
                .flatten()
                .take(i)
                .any(|t| t == tool)
            {
                return Err(format!("allowed tool '{tool}' is given twice"));
            }
        }
        if blank(&self.version) {
            return Err("the version is blank".into());
        }
        Ok(())
    }

    /// The fields given, as the `load_skill` result shows them.
    pub(super) fn shown(&self, result: &mut Value) {
        let Some(out) = result.as_object_mut() else {
            return;
        };
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                out.insert(key.into(), value);
            }
        };
        put("version", self.version.clone().map(Value::from));
        put("license", self.license.clone().map(Value::from));
        put("compatibility", self.compatibility.clone().map(Value::from));
        let metadata: Map<String, Value> = self
            .metadata
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        put(
            "metadata",
            (!metadata.is_empty()).then_some(Value::Object(metadata)),
        );
        put(
            "allowedTools",
            self.allowed_tools.as_ref().map(|t| json!(t)),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_fields_are_checked() {
        let ok = Skill::new("s", "d", "i")
            .license("MIT")
            .compatibility("Needs network access")
            .metadata("author", "ops")
            .allowed_tools(["add_note", "search"])
            .version("v2");
        assert_eq!(ok.check(), Ok(()));
        for (skill, why) in [
            (Skill::new("s", "d", "i").license(" "), "license is blank"),
            (
                Skill::new("s", "d", "i").compatibility("x".repeat(501)),
                "compatibility must be 1-500",
            ),
            (
                Skill::new("s", "d", "i").metadata(" ", "v"),
                "metadata key is blank",
            ),
            (
                Skill::new("s", "d", "i")
                    .metadata("a", "1")
                    .metadata("a", "2"),
                "'a' is given twice",
            ),
            (
                Skill::new("s", "d", "i").allowed_tools(["Bash(git:*)"]),
                "not a tool name",
            ),
            (
                Skill::new("s", "d", "i").allowed_tools(["a", "a"]),
                "allowed tool 'a' is given twice",
            ),
            (Skill::new("s", "d", "i").version(""), "version is blank"),
        ] {
            let err = skill.check().unwrap_err();
            assert!(err.reason.contains(why), "{why}: {err}");
        }
    }

    #[test]
    fn the_fields_given_are_shown() {
        let skill = Skill::new("s", "d", "i")
            .license("MIT")
            .metadata("author", "ops")
            .allowed_tools(["add_note"])
            .version("v2");
        let mut shown = json!({ "name": "s" });
        skill.frontmatter().shown(&mut shown);
        assert_eq!(
            shown,
            json!({ "name": "s", "version": "v2", "license": "MIT", "metadata": { "author": "ops" }, "allowedTools": ["add_note"] })
        );
        let mut bare = json!({ "name": "s" });
        Skill::new("s", "d", "i").frontmatter().shown(&mut bare);
        assert_eq!(bare, json!({ "name": "s" }));
    }
}
