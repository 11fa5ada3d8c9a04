//! A small HTTP proxy in front of the engine's socket, to make the engine
//! look different (a limit it cannot enforce), slow (answers held back),
//! fail (container removal), or vanish mid-run and come back — without
//! disturbing the real engine other tests use.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// `/info` reports these support flags (`SwapLimit`, `MemoryLimit`,
    /// `CpuCfsQuota`, `PidsLimit`) as `false`.
    pub hidden_support: Mutex<Vec<&'static str>>,
    /// `DELETE /containers/...` answers 500.
    pub fail_container_removal: AtomicBool,
    /// The answer to `POST /containers/{id}/start` is held back this long (ms)
    /// after the engine gave it: the program already runs meanwhile.
    pub delay_start_ms: AtomicU64,
    /// The answer to `POST /containers/{id}/wait` is held back this long (ms).
    pub delay_wait_ms: AtomicU64,
    /// An attach stream is cut (closed, as a dropped connection would be)
    /// after this many bytes of output reached the client; 0: never.
    pub cut_attach_after_bytes: AtomicU64,
    /// `GET /events` answers 500: the engine's events cannot be watched.
    pub fail_events: AtomicBool,
}

impl Faults {
    pub fn hide_support(&self, flag: &'static str) {
        self.hidden_support.lock().unwrap().push(flag);
    }
}

pub struct EngineProxy {
    socket: PathBuf,
    /// The engine's own socket, behind the proxy.
    upstream: Arc<PathBuf>,
    _dir: tempfile::TempDir,
    runtime: Option<tokio::runtime::Runtime>,
    pub faults: Arc<Faults>,
}

impl EngineProxy {
    pub fn start() -> EngineProxy {
        EngineProxy::start_for(Path::new(ENGINE_SOCKET))
    }

    /// A proxy in front of the engine at `upstream`.
    pub fn start_for(upstream: &Path) -> EngineProxy {
        let dir = tempfile::tempdir().expect("temp dir for the proxy socket");
        let socket = dir.path().join("engine.sock");
        let mut proxy = EngineProxy {
            socket,
            upstream: Arc::new(upstream.to_path_buf()),
            _dir: dir,
            runtime: None,
            faults: Arc::new(Faults::default()),
        };
        proxy.serve();
        proxy
    }

    /// The engine comes back on the same socket.
    pub fn restart(&mut self) {
        self.stop();
        self.serve();
    }

    fn serve(&mut self) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("proxy runtime");
        let listener = {
            let _guard = runtime.enter();
            UnixListener::bind(&self.socket).expect("bind proxy socket")
        };
        let loop_faults = self.faults.clone();
        let upstream = self.upstream.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let faults = loop_faults.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let faults = faults.clone();
                        let upstream = upstream.clone();
                        async move { Ok::<_, Infallible>(handle(req, &faults, &upstream).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        self.runtime = Some(runtime);
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

async fn handle(
    mut req: Request<Incoming>,
    faults: &Faults,
    upstream: &Path,
) -> Response<ProxyBody> {
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
    if path.ends_with("/events") && faults.fail_events.load(Ordering::SeqCst) {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"message":"injected events failure"}"#,
        );
    }
    let hidden: Vec<&'static str> = faults.hidden_support.lock().unwrap().clone();
    let rewrite_info = path.ends_with("/info") && !hidden.is_empty();
    let post = req.method() == hyper::Method::POST && path.contains("/containers/");
    let delay_ms = if post && path.ends_with("/start") {
        faults.delay_start_ms.load(Ordering::SeqCst)
    } else if post && path.ends_with("/wait") {
        faults.delay_wait_ms.load(Ordering::SeqCst)
    } else {
        0
    };
    let client_upgrade = hyper::upgrade::on(&mut req);

    let upstream = match UnixStream::connect(upstream).await {
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

    if delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }

    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let upstream_upgrade = hyper::upgrade::on(&mut response);
        let cut = faults.cut_attach_after_bytes.load(Ordering::SeqCst);
        tokio::spawn(async move {
            if let (Ok(client), Ok(upstream)) = (client_upgrade.await, upstream_upgrade.await) {
                let mut client = TokioIo::new(client);
                let mut upstream = TokioIo::new(upstream);
                if cut == 0 {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    return;
                }
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut client_read, mut client_write) = tokio::io::split(client);
                let (upstream_read, mut upstream_write) = tokio::io::split(upstream);
                let input = tokio::io::copy(&mut client_read, &mut upstream_write);
                let output = async {
                    let _ = tokio::io::copy(&mut upstream_read.take(cut), &mut client_write).await;
                    // A clean end (FIN), as a connection ended by a middlebox looks.
                    let _ = client_write.shutdown().await;
                };
                let _ = tokio::join!(input, output);
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
        for flag in hidden {
            info[flag] = serde_json::Value::Bool(false);
        }
        let mut rewritten = full(parts.status, serde_json::to_vec(&info).unwrap_or_default());
        *rewritten.headers_mut() = parts.headers;
        rewritten.headers_mut().remove("content-length");
        return rewritten;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.boxed())
}
