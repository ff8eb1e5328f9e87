//! Routing: Unit's `match` conditions and the patterns they are written in.
//!
//! [`matcher::Match`] is a compiled `match` object; [`pattern::PatternSet`] and [`address::AddressSet`] are
//! the string and address patterns inside it; [`fields`] parses query arguments and cookies for both the
//! conditions and the `$arg_*`/`$cookie_*` variables.

pub mod address;
pub mod fields;
pub mod matcher;
pub mod pattern;
mod table;
