//! Image references pinned by digest: the only kind this crate fetches.

use oci_client::Reference;

use crate::digest::Digest;
use crate::error::ImageError;

/// `registry/repository@sha256:<hex>`, checked without any network access.
#[derive(Debug, Clone)]
pub(crate) struct PinnedReference {
    /// As the caller wrote it, for messages.
    pub(crate) text: String,
    /// The digest the reference pins (a manifest, or an index).
    pub(crate) digest: Digest,
    /// The same reference for oci-client, by digest only (a tag written
    /// beside the digest is dropped: the digest alone decides what is fetched).
    pub(crate) oci: Reference,
}

impl PinnedReference {
    pub(crate) fn parse(reference: &str) -> Result<PinnedReference, ImageError> {
        let Some((name, digest)) = reference.rsplit_once('@') else {
            return Err(ImageError::NotPinned {
                reference: reference.to_owned(),
            });
        };
        let digest = Digest::parse(digest).map_err(|reason| ImageError::InvalidDigest {
            reference: reference.to_owned(),
            digest: digest.to_owned(),
            reason,
        })?;
        let parsed: Reference =
            name.parse()
                .map_err(|e: oci_client::ParseError| ImageError::InvalidReference {
                    reference: reference.to_owned(),
                    reason: e.to_string(),
                })?;
        let oci = Reference::with_digest(
            parsed.registry().to_owned(),
            parsed.repository().to_owned(),
            digest.to_string(),
        );
        Ok(PinnedReference {
            text: reference.to_owned(),
            digest,
            oci,
        })
    }

    /// The registry's host (and port) as oci-client contacts it.
    pub(crate) fn registry(&self) -> &str {
        self.oci.resolve_registry()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:379e71d9d251ff242a9853a958646f7cc3a7145a80bba34276c56903d0865e42";

    #[test]
    fn accepts_a_digest_and_drops_a_tag_beside_it() {
        let pinned = PinnedReference::parse(&format!("127.0.0.1:5000/python-sandbox@{DIGEST}"))
            .expect("pinned");
        assert_eq!(pinned.registry(), "127.0.0.1:5000");
        assert_eq!(pinned.oci.repository(), "python-sandbox");
        assert_eq!(pinned.digest.to_string(), DIGEST);
        let tagged = PinnedReference::parse(&format!("127.0.0.1:5000/python-sandbox:b@{DIGEST}"))
            .expect("pinned");
        assert_eq!(tagged.oci.tag(), None);
        assert_eq!(tagged.oci.digest(), Some(DIGEST));
    }

    #[test]
    fn refuses_tags_and_bad_digests() {
        assert!(matches!(
            PinnedReference::parse("127.0.0.1:5000/python-sandbox:bookworm"),
            Err(ImageError::NotPinned { .. })
        ));
        assert!(matches!(
            PinnedReference::parse("python@sha256:1234"),
            Err(ImageError::InvalidDigest { .. })
        ));
        assert!(matches!(
            PinnedReference::parse(&format!("UPPER/Case@{DIGEST}")),
            Err(ImageError::InvalidReference { .. })
        ));
    }
}
