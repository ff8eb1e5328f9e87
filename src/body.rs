//! The response body type shared by every action, and small constructors for it.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};

/// Every response body rein produces: in-memory or streamed, erased to one type.
pub type Body = BoxBody<Bytes, std::io::Error>;

pub fn full(data: impl Into<Bytes>) -> Body {
    Full::new(data.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}
