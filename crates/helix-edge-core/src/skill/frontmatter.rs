//! The frontmatter of a `SKILL.md`: the YAML between a first line `---` and the next
//! `---` line. helix-edge reads the part of YAML that skill files use: top-level
//! `key: value` lines whose value is plain, `'single'` or `"double"` quoted, or a block
//! scalar (`>` folded, `|` literal) on the indented lines below. Only `name` and
//! `description` are read; other keys (`license`, `metadata` with its indented map, …)
//! are passed over. Anything else is an error naming the line.

/// The fields helix-edge reads.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Fields {
    pub name: String,
    pub description: String,
}

/// The fields and the body after the frontmatter.
pub(super) fn parse(text: &str) -> Result<(Fields, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("SKILL.md must start with a '---' line (YAML frontmatter)".into());
    }
    let mut yaml = Vec::new();
    let mut consumed = text.len() - lines.clone().map(str::len).sum::<usize>();
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push(line.trim_end_matches(['\n', '\r']));
    }
    if !closed {
        return Err("the frontmatter has no closing '---' line".into());
    }
    let fields = read_fields(&yaml)?;
    Ok((fields, &text[consumed..]))
}

fn read_fields(lines: &[&str]) -> Result<Fields, String> {
    let mut fields = Fields::default();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!("frontmatter line {i}: unexpected indentation"));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("frontmatter line {i}: expected 'key: value'"));
        };
        // The indented lines below belong to this key (a block scalar, a nested map).
        let start = i;
        while i < lines.len() && (lines[i].starts_with([' ', '\t']) || lines[i].trim().is_empty()) {
            i += 1;
        }
        let block = &lines[start..i];
        let slot = match key.trim() {
            "name" => &mut fields.name,
            "description" => &mut fields.description,
            _ => continue,
        };
        *slot = scalar(value.trim(), block).map_err(|e| format!("frontmatter '{key}': {e}"))?;
    }
    if fields.name.is_empty() {
        return Err("the frontmatter has no name".into());
    }
    if fields.description.is_empty() {
        return Err("the frontmatter has no description".into());
    }
    Ok(fields)
}

/// A scalar value: inline (plain or quoted) or a block scalar over `block`.
fn scalar(value: &str, block: &[&str]) -> Result<String, String> {
    let value = strip_comment(value);
    let folded = match value.chars().next() {
        Some('>') => true,
        Some('|') => false,
        _ if !block.iter().all(|l| l.trim().is_empty()) => {
            return Err("a multi-line value needs '>' or '|'".into());
        }
        Some('"') => return double_quoted(value),
        Some('\'') => return single_quoted(value),
        _ => return Ok(value.to_string()),
    };
    let indent = block
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = block
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect();
    let text = if folded {
        lines
            .split(|l| l.is_empty())
            .map(|p| p.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        lines.join("\n")
    };
    Ok(text.trim().to_string())
}

/// A plain value without a trailing ` # comment`.
fn strip_comment(value: &str) -> &str {
    if value.starts_with(['"', '\'']) {
        return value;
    }
    value.split_once(" #").map_or(value, |(v, _)| v).trim_end()
}

fn single_quoted(value: &str) -> Result<String, String> {
    let inner = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .ok_or("an unterminated quoted value")?;
    Ok(inner.replace("''", "'"))
}

fn double_quoted(value: &str) -> Result<String, String> {
    let inner = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .ok_or("an unterminated quoted value")?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some(c @ ('"' | '\\' | '/')) => c,
            other => {
                return Err(format!(
                    "an unsupported escape '\\{}'",
                    other.unwrap_or(' ')
                ));
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fields(name: &str, description: &str) -> Fields {
        Fields {
            name: name.into(),
            description: description.into(),
        }
    }

    #[test]
    fn plain_and_quoted_values() {
        let md = "---\nname: pdf-forms\ndescription: Fill in PDF forms. Use it for forms.\n---\n# PDF\nbody\n";
        let (f, body) = parse(md).unwrap();
        assert_eq!(
            f,
            fields("pdf-forms", "Fill in PDF forms. Use it for forms.")
        );
        assert_eq!(body, "# PDF\nbody\n");

        let md = "---\r\nname: 'a'\r\ndescription: \"say \\\"hi\\\": now\"\r\n---\r\nx";
        assert_eq!(parse(md).unwrap(), (fields("a", "say \"hi\": now"), "x"));
        let md = "---\nname: a # the name\ndescription: 'it''s'\n---\n";
        assert_eq!(parse(md).unwrap(), (fields("a", "it's"), ""));
    }

    #[test]
    fn block_scalars_and_other_keys() {
        let md = "---\nname: a\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n  author: x\n\
                  description: >\n  One line\n  and more.\n\n  Second.\nallowed-tools: Bash\n---\nbody";
        let (f, body) = parse(md).unwrap();
        assert_eq!(f, fields("a", "One line and more.\nSecond."));
        assert_eq!(body, "body");
        let md = "---\nname: a\ndescription: |\n  keep\n  lines\n---\n";
        assert_eq!(parse(md).unwrap().0, fields("a", "keep\nlines"));
    }

    #[test]
    fn errors_name_the_problem() {
        let cases = [
            ("name: a\n", "must start"),
            ("---\nname: a\ndescription: d\n", "closing"),
            ("---\ndescription: d\n---\n", "no name"),
            ("---\nname: a\n---\n", "no description"),
            ("---\nname: a\njust text\n---\n", "line 2"),
            ("---\nname: a\ndescription: d\n  more\n---\n", "'>' or '|'"),
            ("---\nname: \"a\ndescription: d\n---\n", "unterminated"),
        ];
        for (md, expected) in cases {
            let err = parse(md).unwrap_err();
            assert!(err.contains(expected), "{md:?}: {err}");
        }
    }
}
