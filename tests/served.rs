//! `progscore serve` started in a scratch folder: the kit's [`Served`]
//! with its config (see `progscore_test_kit::served`).

pub use progscore_test_kit::served::{Reply, Served, request, try_post_json, try_request};

use crate::Dir;

/// Starting a [`Served`] in a [`Dir`].
pub trait ServeIn {
    /// Starts `progscore serve --listen 127.0.0.1:0` in `dir` and waits
    /// until it says where it listens.
    fn start(dir: &Dir) -> Served;
    /// Starts it with `args`; `Err` with its exit status and stderr if it
    /// exits before serving.
    fn try_start(dir: &Dir, args: &[&str]) -> Result<Served, (Option<i32>, String)>;
}

impl ServeIn for Served {
    fn start(dir: &Dir) -> Served {
        Served::try_start(dir, &["--listen", "127.0.0.1:0"]).unwrap_or_else(|(code, log)| {
            panic!("progscore serve exited with {code:?} before serving:\n{log}")
        })
    }

    fn try_start(dir: &Dir, args: &[&str]) -> Result<Served, (Option<i32>, String)> {
        let mut command = dir.command();
        command.arg("serve").args(args);
        Served::spawn(command)
    }
}
