//! Keeps a share path inside what its template fixes: the expansion of `"share": "/srv/www/$arg_f"` may
//! name any file below `/srv/www/`, but `?f=../secret.txt` may not climb out of it.
//!
//! The check is lexical, on the expanded path before any lookup, and applies whatever the variable
//! (`$arg_*` and `$cookie_*` come from the client as they are, `$header_*` too, `$request_uri` is raw): a `..`
//! segment in the part a request wrote may not go above the directory the fixed text ends in, nor, when that
//! text ends inside a name (`/srv/www$arg_f`), out of that name. `$uri` is normalised and `$host` validated, so
//! neither ever has a `..` to refuse. Symlinks are left to `follow_symlinks` and `chroot`, which the kernel
//! enforces as it opens the file.

/// Whether `path`, the expansion of a template whose first `fixed` bytes are its text before any variable,
/// stays within that text's directory (and name, if the text ends inside one).
pub fn within_fixed_part(path: &str, fixed: usize) -> bool {
    let Some(text) = path.get(..fixed) else {
        return false;
    };
    if fixed == path.len() {
        // All of it is the administrator's.
        return true;
    }
    let dir_end = text.rfind('/').map_or(0, |slash| slash + 1);
    if !path.as_bytes()[dir_end..].windows(2).any(|w| w == b"..") {
        // No `..` from the fixed text's last directory on (the request may complete a name the text
        // began): nothing can climb. The common case, and it is checked per request.
        return true;
    }
    // Text after the last slash is the start of a name the request completes: leaving that name is leaving
    // the fixed part.
    let floor = usize::from(dir_end < fixed);
    let mut depth = 0usize;
    for segment in path[dir_end..].split('/') {
        match segment {
            "" | "." => {}
            ".." if depth <= floor => return false,
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::within_fixed_part;

    fn ok(template_text: &str, rest: &str) -> bool {
        within_fixed_part(&format!("{template_text}{rest}"), template_text.len())
    }

    #[test]
    fn climbs_in_the_variable_part_stay_below_the_fixed_directory() {
        assert!(ok("/srv/www/", "a.txt"));
        assert!(ok("/srv/www/", "a/../b.txt"));
        assert!(ok("/srv/www/", "a/./b/"));
        assert!(ok("/srv/www/", ""));
        assert!(!ok("/srv/www/", ".."));
        assert!(!ok("/srv/www/", "../secret"));
        assert!(!ok("/srv/www/", "a/../../secret"));
        assert!(!ok("/srv/www/", "./../secret"));
        assert!(!ok("/srv/www/", "a//..//..//secret"));
        // A climb that comes back down still passed above the root on the way.
        assert!(!ok("/srv/www/", "../www/a.txt"));
    }

    #[test]
    fn text_ending_inside_a_name_keeps_the_request_inside_that_name() {
        assert!(ok("/srv/www", "/a.txt"));
        assert!(ok("/srv/www", "-2/a.txt"));
        assert!(ok("/srv/www", "/a/../b"));
        assert!(!ok("/srv/www", "/.."));
        assert!(!ok("/srv/www", "/../www2/secret"));
        assert!(!ok("/srv/.", "./x"));
        assert!(ok("/srv/www", ".."), "www.. is a name");
    }

    #[test]
    fn dots_in_the_fixed_text_are_the_administrators() {
        assert!(ok("/srv/www/../other/", "a.txt"));
        assert!(within_fixed_part("/srv/..", 7), "no variable at all");
        assert!(ok("/srv/www/../other/", "x/.."));
        assert!(!ok("/srv/www/../other/", ".."));
    }

    #[test]
    fn a_template_starting_with_a_variable_only_refuses_climbs_above_its_start() {
        assert!(ok("", "/etc/passwd"));
        assert!(!ok("", "/../etc"));
        assert!(!ok("", "../etc"));
    }

    #[test]
    fn a_prefix_that_does_not_fit_the_path_is_refused() {
        assert!(!within_fixed_part("/a", 5));
        assert!(!within_fixed_part("/é", 2), "not a character boundary");
    }
}
