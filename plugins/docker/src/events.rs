//! What the engine saw happen to one container: its events, watched from
//! before the container starts until the engine destroyed it.
//!
//! A SIGKILL looks the same in the exit code whoever sent it (137), and
//! under gVisor a program can send one to itself. What the engine did tells
//! them apart: a `kill` it logged that progscore did not ask for (`docker
//! kill`, `docker rm -f`, `docker stop`, a watchdog) makes the program's
//! outcome unknown; an `oom` it logged is the memory cap's. The engine logs
//! a container's `kill` and `oom` events before its `die` (under the
//! container's lock) and its `destroy` last, and delivers them in that
//! order, so once `destroy` arrived nothing that happened to the container
//! is missing.
//!
//! One filtered subscription per container, opened before the container is
//! created: the container's unique name is the filter, so nothing of other
//! containers is read, and the stream ends with the container. The engine
//! answers the subscription before it registers it, so the subscription
//! also asks for the engine's buffered events (`since` the epoch: only this
//! container's, which are few); the engine registers a subscription and
//! reads its buffer in one step, so there is no gap between the two. The
//! buffer is short (it drops its oldest events under load), but it drops
//! them in order: once the container's own `create` event arrived, nothing
//! after it can be missing ([`Seen::complete`]).

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::EventsOptionsBuilder;
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::engine::describe;

/// What the engine reported for the container so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    /// Its `create` event arrived: everything after it is seen.
    pub created: bool,
    /// The signals of the `kill` events, in order (progscore's among them).
    pub kills: Vec<String>,
    /// The engine reported an OOM kill in the container.
    pub oom: bool,
    /// The container is paused (`docker pause`) now.
    pub paused: bool,
    /// How often it was paused.
    pub pauses: usize,
    pub died: bool,
    pub destroyed: bool,
    /// The stream failed or ended before `destroy`: why.
    pub broken: Option<String>,
}

impl Seen {
    /// Whether the events were watched from the container's creation to its
    /// destruction without a gap.
    pub fn complete(&self) -> bool {
        self.created && self.destroyed
    }
}

/// A running subscription to one container's events.
pub(crate) struct ContainerEvents {
    seen: watch::Receiver<Seen>,
    task: JoinHandle<()>,
}

impl ContainerEvents {
    /// Subscribes to the events of the container named `name` (before it
    /// is created).
    pub fn watch(docker: &Docker, name: &str) -> ContainerEvents {
        let (sender, seen) = watch::channel(Seen::default());
        let filters = HashMap::from([
            ("type", vec!["container".to_string()]),
            ("container", vec![name.to_string()]),
        ]);
        let options = EventsOptionsBuilder::new()
            .since("1")
            .filters(&filters)
            .build();
        let mut stream = Box::pin(docker.events(Some(options)));
        let name = name.to_string();
        let task = tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        let why = format!("the engine's event stream failed: {}", describe(&err));
                        sender.send_modify(|seen| seen.broken = Some(why));
                        return;
                    }
                };
                let attributes = event
                    .actor
                    .as_ref()
                    .and_then(|actor| actor.attributes.as_ref());
                // The engine's filter also takes names it is a prefix of.
                if attributes.and_then(|a| a.get("name")) != Some(&name) {
                    continue;
                }
                let signal = attributes.and_then(|a| a.get("signal").cloned());
                let destroyed = event.action.as_deref() == Some("destroy");
                sender.send_modify(|seen| match event.action.as_deref() {
                    Some("create") => seen.created = true,
                    Some("kill") => seen.kills.push(signal.unwrap_or_default()),
                    Some("oom") => seen.oom = true,
                    Some("pause") => {
                        seen.paused = true;
                        seen.pauses += 1;
                    }
                    Some("unpause") => seen.paused = false,
                    Some("die") => seen.died = true,
                    Some("destroy") => seen.destroyed = true,
                    _ => {}
                });
                if destroyed {
                    return;
                }
            }
            sender.send_modify(|seen| {
                seen.broken = Some("the engine's event stream ended".into());
            });
        });
        ContainerEvents { seen, task }
    }

    /// Waits (at most `limit`) until the subscription is proven live by the
    /// container's `create` event; whether it is.
    pub async fn live(&self, limit: Duration) -> bool {
        self.until(limit, |seen| seen.created).await.created
    }

    /// Waits (at most `limit`) until the engine destroyed the container, and
    /// returns all it reported.
    pub async fn settled(&self, limit: Duration) -> Seen {
        self.until(limit, |seen| seen.destroyed).await
    }

    /// Whether the engine reported the container paused (and not unpaused
    /// since).
    pub fn paused(&self) -> bool {
        self.seen.borrow().paused
    }

    /// What was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    async fn until(&self, limit: Duration, done: impl Fn(&Seen) -> bool) -> Seen {
        let mut seen = self.seen.clone();
        let waited = tokio::time::timeout(
            limit,
            seen.wait_for(|seen| done(seen) || seen.broken.is_some()),
        )
        .await;
        match waited {
            Ok(Ok(seen)) => seen.clone(),
            // The task ended (it keeps the sender until then) or time ran out.
            _ => self.seen(),
        }
    }
}

impl Drop for ContainerEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}
