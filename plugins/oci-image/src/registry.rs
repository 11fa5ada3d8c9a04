//! The registry, through oci-client: manifests and blobs by digest, nothing
//! else (no tags are resolved, nothing is pushed). Every byte fetched is
//! hashed here, whatever oci-client checks on its own.

use std::path::Path;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;

use crate::digest::Digest;
use crate::error::ImageError;
use crate::manifest::MANIFEST_MEDIA_TYPES;
use crate::options::CacheOptions;
use crate::reference::PinnedReference;

/// A manifest larger than this is not an image manifest (Docker's own limit
/// is 4 MiB).
const MANIFEST_LIMIT: usize = 4 << 20;

pub(crate) struct Registry {
    client: oci_client::Client,
}

impl Registry {
    pub(crate) fn new(options: &CacheOptions) -> Registry {
        let protocol = if options.http_registries.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(options.http_registries.clone())
        };
        // One TLS crypto provider in the whole build (ring, as bollard's):
        // oci-client is built without its own, so it uses the process's.
        // One installed before (by anyone) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = oci_client::Client::new(ClientConfig {
            protocol,
            // Indexes are resolved by this crate, from the verified index.
            platform_resolver: None,
            connect_timeout: Some(options.connect_timeout),
            read_timeout: Some(options.read_timeout),
            ..ClientConfig::default()
        });
        Registry { client }
    }

    /// The manifest (or index) `digest` of `reference`'s repository, checked
    /// against the digest.
    pub(crate) async fn manifest(
        &self,
        reference: &PinnedReference,
        digest: &Digest,
    ) -> Result<Vec<u8>, ImageError> {
        let what = format!("manifest {digest}");
        let oci = reference.oci.clone_with_digest(digest.to_string());
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&oci, &RegistryAuth::Anonymous, MANIFEST_MEDIA_TYPES)
            .await
            .map_err(|e| registry_error(reference, &what, "manifest", digest, e))?;
        if bytes.len() > MANIFEST_LIMIT {
            return Err(ImageError::BadImage {
                reference: reference.text.clone(),
                what: "manifest",
                digest: digest.to_string(),
                reason: format!("is {} bytes, more than a manifest can be", bytes.len()),
            });
        }
        let actual = Digest::of_bytes(&bytes);
        if &actual != digest {
            return Err(ImageError::DigestMismatch {
                reference: reference.text.clone(),
                what,
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(bytes.to_vec())
    }

    /// Streams blob `digest` into `dest` (a new file) while hashing it; the
    /// file is complete and matches `digest` and `size` when this returns Ok.
    /// On an error the caller removes `dest`.
    pub(crate) async fn blob_to_file(
        &self,
        reference: &PinnedReference,
        what: &str,
        digest: &Digest,
        size: u64,
        dest: &Path,
    ) -> Result<(), ImageError> {
        let digest_text = digest.to_string();
        let mut stream = self
            .client
            .pull_blob_stream(&reference.oci, digest_text.as_str())
            .await
            .map_err(|e| registry_error(reference, what, "blob", digest, e))?;
        let mut file = tokio::fs::File::create_new(dest)
            .await
            .map_err(|e| ImageError::io("create", dest, e))?;
        let mut hasher = Sha256::new();
        let mut count = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| stream_error(reference, what, digest, e))?;
            count += chunk.len() as u64;
            // A registry that sends more than the descriptor says is not
            // followed further (it could send forever).
            if count > size {
                return Err(ImageError::DigestMismatch {
                    reference: reference.text.clone(),
                    what: what.to_owned(),
                    expected: format!("{digest} ({size} bytes)"),
                    actual: format!("more than {size} bytes"),
                });
            }
            hasher.update(&chunk);
            file.write_all(&chunk)
                .await
                .map_err(|e| ImageError::io("write", dest, e))?;
        }
        file.sync_all()
            .await
            .map_err(|e| ImageError::io("sync", dest, e))?;
        let actual = Digest::from_hasher(hasher);
        if &actual != digest || count != size {
            return Err(ImageError::DigestMismatch {
                reference: reference.text.clone(),
                what: what.to_owned(),
                expected: format!("{digest} ({size} bytes)"),
                actual: format!("{actual} ({count} bytes)"),
            });
        }
        Ok(())
    }
}

fn registry_error(
    reference: &PinnedReference,
    what: &str,
    kind: &'static str,
    digest: &Digest,
    error: OciDistributionError,
) -> ImageError {
    let not_found = match &error {
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown
                    | OciErrorCode::BlobUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::NotFound
                    | OciErrorCode::ManifestBlobUnknown
            )
        }),
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        _ => false,
    };
    if not_found {
        return ImageError::NotFound {
            reference: reference.text.clone(),
            registry: reference.registry().to_owned(),
            what: kind,
            digest: digest.to_string(),
        };
    }
    if let OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) =
        &error
    {
        return ImageError::DigestMismatch {
            reference: reference.text.clone(),
            what: what.to_owned(),
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    let hint = match &error {
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => UNREACHABLE,
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => UNREACHABLE,
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            "the registry wants credentials, which the image cache does not send: use a \
             registry that allows anonymous pulls"
        }
        _ => "check the registry's log",
    };
    ImageError::Registry {
        reference: reference.text.clone(),
        registry: reference.registry().to_owned(),
        what: what.to_owned(),
        detail: chain(&error),
        hint,
    }
}

const UNREACHABLE: &str = "is the registry running? (scripts/setup.sh starts the local one \
    at 127.0.0.1:5000; a registry that speaks plain HTTP must be listed in \
    CacheOptions::http_registries)";

/// An error from the middle of a blob's stream: a broken connection, or
/// oci-client's own digest check at the end.
fn stream_error(
    reference: &PinnedReference,
    what: &str,
    digest: &Digest,
    error: std::io::Error,
) -> ImageError {
    if let Some(DigestError::VerificationError { expected, actual }) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<DigestError>())
    {
        return ImageError::DigestMismatch {
            reference: reference.text.clone(),
            what: what.to_owned(),
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    ImageError::Registry {
        reference: reference.text.clone(),
        registry: reference.registry().to_owned(),
        what: format!("{what} ({digest})"),
        detail: chain(&error),
        hint: UNREACHABLE,
    }
}

/// An error and its sources, since reqwest's own message alone ("error
/// sending request") does not say what failed.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn chain_joins_sources_once() {
        let inner = std::io::Error::other("connection refused");
        let outer = std::io::Error::other(inner);
        assert_eq!(super::chain(&outer), "connection refused");
    }
}
