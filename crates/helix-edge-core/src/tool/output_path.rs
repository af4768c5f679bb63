//! Where a tool's results may be stored in the state (`_outputPath`): the designer's
//! policy, which the tool carries. What it means for a call is [`crate::memory`]'s.

/// The meta-argument's name.
pub const OUTPUT_PATH: &str = "_outputPath";

/// Where a tool's results may be stored in the state.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum OutputPath {
    /// Not offered: the result is only the model's to read (the default).
    #[default]
    Off,
    /// Always stored at this JSON Pointer (prescribed by the designer).
    Fixed(String),
    /// The model may choose a JSON Pointer (or none) from these; an empty list offers
    /// every path of the agent's state schema (every property, `…/-` for arrays).
    Choose(Vec<String>),
}
