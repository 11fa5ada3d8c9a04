//! A small HTTP proxy in front of the engine's socket, to make the engine
//! look different (no swap-limit support), fail (container removal), or
//! vanish mid-run — without disturbing the real engine other tests use.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};

const ENGINE_SOCKET: &str = "/var/run/docker.sock";

/// What the proxy changes.
#[derive(Default)]
pub struct Faults {
    /// `/info` reports `SwapLimit: false`.
    pub hide_swap_limit: AtomicBool,
    /// `DELETE /containers/...` answers 500.
    pub fail_container_removal: AtomicBool,
}

pub struct EngineProxy {
    socket: PathBuf,
    _dir: tempfile::TempDir,
    runtime: Option<tokio::runtime::Runtime>,
    pub faults: Arc<Faults>,
}

impl EngineProxy {
    pub fn start() -> EngineProxy {
        let dir = tempfile::tempdir().expect("temp dir for the proxy socket");
        let socket = dir.path().join("engine.sock");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("proxy runtime");
        let faults = Arc::new(Faults::default());
        let listener = {
            let _guard = runtime.enter();
            UnixListener::bind(&socket).expect("bind proxy socket")
        };
        let loop_faults = faults.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let faults = loop_faults.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let faults = faults.clone();
                        async move { Ok::<_, Infallible>(handle(req, &faults).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        EngineProxy {
            socket,
            _dir: dir,
            runtime: Some(runtime),
            faults,
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The engine "goes away": every connection through the proxy is cut and
    /// new ones are refused.
    pub fn stop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

fn full(status: StatusCode, body: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    response
}

async fn handle(mut req: Request<Incoming>, faults: &Faults) -> Response<ProxyBody> {
    let path = req.uri().path().to_string();
    if req.method() == hyper::Method::DELETE
        && path.contains("/containers/")
        && faults.fail_container_removal.load(Ordering::SeqCst)
    {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"message":"injected removal failure"}"#,
        );
    }
    let rewrite_info = path.ends_with("/info") && faults.hide_swap_limit.load(Ordering::SeqCst);
    let client_upgrade = hyper::upgrade::on(&mut req);

    let upstream = match UnixStream::connect(ENGINE_SOCKET).await {
        Ok(stream) => stream,
        Err(err) => {
            return full(
                StatusCode::BAD_GATEWAY,
                format!("{{\"message\":\"{err}\"}}"),
            );
        }
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(err) => {
                return full(
                    StatusCode::BAD_GATEWAY,
                    format!("{{\"message\":\"{err}\"}}"),
                );
            }
        };
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let mut response = match sender.send_request(req).await {
        Ok(response) => response,
        Err(err) => {
            return full(
                StatusCode::BAD_GATEWAY,
                format!("{{\"message\":\"{err}\"}}"),
            );
        }
    };

    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let upstream_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            if let (Ok(client), Ok(upstream)) = (client_upgrade.await, upstream_upgrade.await) {
                let mut client = TokioIo::new(client);
                let mut upstream = TokioIo::new(upstream);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
        let (parts, _) = response.into_parts();
        return Response::from_parts(
            parts,
            Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
        );
    }

    if rewrite_info {
        let (parts, body) = response.into_parts();
        let bytes = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut info: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        info["SwapLimit"] = serde_json::Value::Bool(false);
        let mut rewritten = full(parts.status, serde_json::to_vec(&info).unwrap_or_default());
        *rewritten.headers_mut() = parts.headers;
        rewritten.headers_mut().remove("content-length");
        return rewritten;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.boxed())
}
