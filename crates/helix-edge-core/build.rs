//! Embeds the OpenAPI document minified: `api/openapi.json` without the whitespace
//! between its tokens (strings are copied as they are).

use std::{env, fs, path::Path};

fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = "api/openapi.json";
    println!("cargo::rerun-if-changed={source}");
    let json = fs::read_to_string(source)?;
    let out = Path::new(&env::var("OUT_DIR")?).join("openapi.min.json");
    fs::write(out, minify(&json))?;
    Ok(())
}
