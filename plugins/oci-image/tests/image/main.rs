//! progscore-oci-image against the real local registry (127.0.0.1:5000,
//! started by scripts/setup.sh) and real files: the project's python image,
//! the fixtures, and synthetic images these tests push.

mod common;
mod layers;
mod private;
mod python;
mod refusals;
