//! Addressing inside the document by control-API paths (`/config/listeners/*:8080/pass`).
//!
//! A path is split on `/` and each segment percent-decoded, so a key holding a slash is written `%2F`
//! (`/config/listeners/unix:%2Frun%2Fapp.sock`). Array elements are addressed by index.

use percent_encoding::percent_decode_str;
use serde_json::Value;

/// Why an edit could not be made; the control API maps each to Unit's status and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("Value doesn't exist.")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
}

/// Splits an API path (after `/config`) into decoded segments; empty segments are ignored.
pub fn segments(path: &str) -> Result<Vec<String>, EditError> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| {
                    EditError::Invalid(format!("the path segment {s:?} is not valid UTF-8"))
                })
        })
        .collect()
}

pub fn get<'v>(doc: &'v Value, segs: &[String]) -> Option<&'v Value> {
    segs.iter().try_fold(doc, |v, seg| match v {
        Value::Object(map) => map.get(seg),
        Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn get_mut<'v>(doc: &'v mut Value, segs: &[String]) -> Option<&'v mut Value> {
    segs.iter().try_fold(doc, |v, seg| match v {
        Value::Object(map) => map.get_mut(seg),
        Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

/// Sets the value at `segs`: replaces the root, an array element, or an object member (creating it). An
/// array index equal to the array's length appends, as Unit's `PUT` does.
pub fn put(doc: &mut Value, segs: &[String], value: Value) -> Result<(), EditError> {
    let Some((last, parent_segs)) = segs.split_last() else {
        *doc = value;
        return Ok(());
    };
    match get_mut(doc, parent_segs).ok_or(EditError::NotFound)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => {
                items[i] = value;
                Ok(())
            }
            Ok(i) if i == items.len() => {
                items.push(value);
                Ok(())
            }
            _ => Err(EditError::NotFound),
        },
        _ => Err(EditError::NotFound),
    }
}

/// Appends `value` to the array at `segs` (Unit's `POST`).
pub fn post(doc: &mut Value, segs: &[String], value: Value) -> Result<(), EditError> {
    match get_mut(doc, segs).ok_or(EditError::NotFound)? {
        Value::Array(items) => {
            items.push(value);
            Ok(())
        }
        _ => Err(EditError::Invalid(
            "POST appends to an array, and this value is not one".to_owned(),
        )),
    }
}

/// Removes the value at `segs`; deleting the root leaves an empty document.
pub fn delete(doc: &mut Value, segs: &[String]) -> Result<(), EditError> {
    let Some((last, parent_segs)) = segs.split_last() else {
        *doc = Value::Object(Default::default());
        return Ok(());
    };
    match get_mut(doc, parent_segs).ok_or(EditError::NotFound)? {
        Value::Object(map) => map.shift_remove(last).map(drop).ok_or(EditError::NotFound),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => {
                items.remove(i);
                Ok(())
            }
            _ => Err(EditError::NotFound),
        },
        _ => Err(EditError::NotFound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn segs(p: &str) -> Vec<String> {
        segments(p).unwrap()
    }

    #[test]
    fn decodes_segments() {
        assert_eq!(segs("/listeners/*:8080/"), ["listeners", "*:8080"]);
        assert_eq!(
            segs("listeners/unix:%2Ftmp%2Fa.sock"),
            ["listeners", "unix:/tmp/a.sock"]
        );
    }

    #[test]
    fn edits_nested_objects_and_arrays() {
        let mut doc = json!({"routes": [{"action": {"return": 200}}], "listeners": {}});
        put(&mut doc, &segs("listeners/*:80"), json!({"pass": "routes"})).unwrap();
        put(&mut doc, &segs("routes/0/action/return"), json!(204)).unwrap();
        post(
            &mut doc,
            &segs("routes"),
            json!({"action": {"return": 404}}),
        )
        .unwrap();
        assert_eq!(
            get(&doc, &segs("routes/1/action/return")),
            Some(&json!(404))
        );
        assert_eq!(
            get(&doc, &segs("routes/0/action/return")),
            Some(&json!(204))
        );
        delete(&mut doc, &segs("routes/0")).unwrap();
        assert_eq!(
            get(&doc, &segs("routes/0/action/return")),
            Some(&json!(404))
        );
        assert_eq!(
            get(&doc, &segs("listeners/*:80/pass")),
            Some(&json!("routes"))
        );
    }

    #[test]
    fn reports_missing_and_invalid_targets() {
        let mut doc = json!({"listeners": {}});
        assert_eq!(
            put(&mut doc, &segs("nope/x"), json!(1)),
            Err(EditError::NotFound)
        );
        assert_eq!(
            delete(&mut doc, &segs("listeners/x")),
            Err(EditError::NotFound)
        );
        assert!(matches!(
            post(&mut doc, &segs("listeners"), json!(1)),
            Err(EditError::Invalid(_))
        ));
        assert_eq!(
            put(&mut doc, &segs("listeners/0/x"), json!(1)),
            Err(EditError::NotFound)
        );
    }

    #[test]
    fn put_at_the_length_of_an_array_appends() {
        let mut doc = json!({"routes": [1]});
        put(&mut doc, &segs("routes/1"), json!(2)).unwrap();
        assert_eq!(doc, json!({"routes": [1, 2]}));
        assert_eq!(
            put(&mut doc, &segs("routes/3"), json!(4)),
            Err(EditError::NotFound)
        );
    }
}
