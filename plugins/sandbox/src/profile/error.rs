//! Why a profile was refused when the config loaded.

use thiserror::Error;

use super::Backend;

/// Why a profile was refused when the config loaded.
#[derive(Debug, Error, PartialEq)]
pub enum ProfileError {
    /// The image could move under us.
    #[error(
        "profile `{profile}`: image `{image}` is not pinned; give `repo@sha256:<64 hex digest>` or `sha256:<64 hex image id>`, never a tag"
    )]
    UnpinnedImage { profile: String, image: String },
    /// An image id given to a backend that fetches images from a registry.
    #[error(
        "profile `{profile}`: image `{image}` is an image id, which only a Docker engine knows; the oci backend fetches images from their registry: give `repo@sha256:<64 hex digest>`"
    )]
    ImageIdWithoutEngine { profile: String, image: String },
    /// A field the backend needs is absent.
    #[error("profile `{profile}`: backend `{backend}` needs field `{field}`")]
    MissingField {
        profile: String,
        backend: Backend,
        /// The missing field.
        field: &'static str,
    },
    /// A field that makes no sense for this backend.
    #[error("profile `{profile}`: field `{field}` does not apply to backend `{backend}`")]
    FieldNotForBackend {
        profile: String,
        backend: Backend,
        field: &'static str,
    },
    /// The command is empty or has an empty word.
    #[error("profile `{profile}`: `command` must be a non-empty list of non-empty strings")]
    BadCommand { profile: String },
    /// A limit could not be understood or is out of range.
    #[error("profile `{profile}`: {section}.{field} = {value:?}: {reason}")]
    BadLimit {
        profile: String,
        /// `limits` or `compile_limits`.
        section: &'static str,
        /// Field under the section.
        field: &'static str,
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A pinned file's sha256 is not 64 lower-case hex digits.
    #[error("profile `{profile}`: {field}.sha256 = {value:?} is not 64 lower-case hex digits")]
    BadSha256 {
        profile: String,
        field: &'static str,
        value: String,
    },
    /// The user is not a non-root numeric `UID[:GID]`.
    #[error(
        "profile `{profile}`: user {user:?} must be a numeric, non-root `UID` or `UID:GID` (e.g. \"65534:65534\")"
    )]
    BadUser { profile: String, user: String },
    /// The program's file name is not a plain file name.
    #[error(
        "profile `{profile}`: source {source_name:?} must be a plain file name (e.g. \"main.cpp\"), without `/`"
    )]
    BadSource {
        profile: String,
        source_name: String,
    },
    /// The compile command is empty or has an empty word.
    #[error("profile `{profile}`: `compile` must be a non-empty list of non-empty strings")]
    BadCompile { profile: String },
    /// `compile_limits` without `compile`.
    #[error("profile `{profile}`: `compile_limits` is given but there is no `compile` command")]
    CompileLimitsWithoutCompile { profile: String },
    /// The runtime name is not a plain word.
    #[error("profile `{profile}`: runtime {runtime:?} is not a valid runtime name")]
    BadRuntime { profile: String, runtime: String },
    /// A sensitive path pattern of `trace` is not a valid absolute pattern.
    #[error("profile `{profile}`: trace.sensitive pattern `{pattern}`: {why}")]
    BadTracePattern {
        profile: String,
        pattern: String,
        why: crate::behaviour::InvalidPathPattern,
    },
}
