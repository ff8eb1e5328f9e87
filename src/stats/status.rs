//! `GET /status` as Unit shows it: the snapshot as JSON, members whose value is unknown left out.

use serde_json::Value;

use super::snapshot::Status;

/// The status document.
pub(crate) fn to_json(status: &Status) -> Value {
    let mut doc = serde_json::to_value(status).unwrap_or_default();
    without_nulls(&mut doc);
    doc
}

/// Drops the members whose value is unknown (`null`) rather than answer `null` where a reader written for Unit
/// expects an object or a number: an absent member reads as absent in every client.
fn without_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(without_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(without_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::snapshot::{AppStatus, ConfigStatus, Connections, Empty, Requests};

    #[test]
    fn the_shape_is_units_with_unknown_members_left_out() {
        let status = Status {
            connections: Connections::default(),
            requests: Requests { total: 4 },
            listeners: Default::default(),
            upstreams: Default::default(),
            applications: [("a".to_owned(), AppStatus::default())].into(),
            certificates: Default::default(),
            config: ConfigStatus {
                generation: 2,
                changed_at: Some(1.0),
            },
            modules: Empty,
        };
        let text = serde_json::to_string(&to_json(&status)).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"connections":{"accepted":0,"active":0,"idle":0,"closed":0,"refused":0},"#,
                r#""requests":{"total":4},"listeners":{},"upstreams":{},"#,
                r#""applications":{"a":{"instances":[],"queued":0,"processes":{"running":0,"starting":0,"idle":0},"requests":{"active":0}}},"#,
                r#""certificates":{},"config":{"generation":2},"modules":{}}"#
            )
        );
    }
}
