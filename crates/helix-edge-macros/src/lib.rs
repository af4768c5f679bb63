//! Build-time macros of helix-edge, re-exported by it; use them through `helix_edge`.
//!
//! - `skills_dir!` (reached as `helix_edge::skills_dir!`): reads a directory of skills
//!   when the worker compiles ([`read`]: the directory's layout, each `SKILL.md`'s YAML
//!   frontmatter) and expands to the `Vec<Skill>` that builds them, each file embedded
//!   with `include_str!`, its frontmatter's fields (the Agent Skills specification's)
//!   and a version hashed from its content. A malformed skill is a compile error naming
//!   it; the worker carries no YAML parser and parses nothing when it starts.

mod read;

use proc_macro::TokenStream;
use proc_macro2::{TokenStream as Tokens, TokenTree};
use quote::quote;
use std::path::{Path, PathBuf};
use syn::LitStr;

/// The expansion of `helix_edge::skills_dir!`: `__skills_dir!($crate, "dir")`, the
/// path relative to the calling crate's directory (or absolute).
#[proc_macro]
#[doc(hidden)]
pub fn __skills_dir(input: TokenStream) -> TokenStream {
    expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn expand(input: Tokens) -> syn::Result<Tokens> {
    let mut tokens = input.into_iter();
    let krate: Tokens = tokens
        .by_ref()
        .take_while(|t| !matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
        .collect();
    let lit: LitStr = syn::parse2(tokens.collect())?;
    let dir = in_crate(Path::new(&lit.value()));
    let skills = read::skills(&dir).map_err(|e| syn::Error::new(lit.span(), e))?;
    let skills = skills.iter().map(|skill| {
        let (name, description, instructions) =
            (&skill.name, &skill.description, &skill.instructions);
        let skill_md = path_str(&skill.skill_md);
        let files = skill.files.iter().map(|(path, file)| {
            let file = path_str(file);
            quote!(.file(#path, ::core::include_str!(#file)))
        });
        let front = &skill.front;
        let license = front.license.iter().map(|l| quote!(.license(#l)));
        let compatibility = front
            .compatibility
            .iter()
            .map(|c| quote!(.compatibility(#c)));
        let metadata = front
            .metadata
            .iter()
            .map(|(k, v)| quote!(.metadata(#k, #v)));
        let allowed = front
            .allowed_tools
            .iter()
            .map(|t| quote!(.allowed_tools([#(#t),*])));
        let version = &skill.version;
        quote!({
            // Rebuilds the worker when the SKILL.md changes.
            const _: &str = ::core::include_str!(#skill_md);
            #krate::skill::Skill::new(#name, #description, #instructions)
                #(#files)* #(#license)* #(#compatibility)* #(#metadata)* #(#allowed)*
                .version(#version)
        })
    });
    Ok(quote!(::std::vec![#(#skills),*]))
}

/// `path` relative to the directory of the crate being compiled.
fn in_crate(path: &Path) -> PathBuf {
    match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(root) if path.is_relative() => Path::new(&root).join(path),
        _ => path.to_path_buf(),
    }
}

fn path_str(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
