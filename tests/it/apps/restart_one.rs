//! Restarting one instance (`/control/applications/NAME/instances/ID/restart`, `rein reload NAME
//! --instance ID`): a new instance started beside it takes traffic, then the old one is retired; the other
//! instances and the generation are untouched, and no request fails.

use std::process::Command;

use super::*;

#[test]
fn one_instance_is_replaced_under_load_and_the_others_are_untouched() {
    let rein = Rein::start();
    let addr = serve_one(&rein, "py", python_app("v1", &[], json!({"processes": 2})));
    wait_ready(&rein, "py", 2);
    let before = instances(&rein, "py");
    let (victim_id, victim_pid) = (before[0]["id"].as_u64().unwrap(), pid_of(&before[0]));
    let other_pid = pid_of(&before[1]);
    let generation = status(&rein, "py")["generation"].as_u64();

    let load = Load::start(addr, &["/", "/"]);
    load.wait_more(50);
    let path = format!("/control/applications/py/instances/{victim_id}/restart");
    let (code, body) = rein.api("GET", &path, None);
    assert_eq!(code, 200, "{body}");
    let by = body["replaced_by"].as_u64().expect("the new instance's id");
    load.wait_more(50);
    let (ok, failures) = load.finish();
    assert_no_failures(&ok, &failures);

    let after = wait_ready(&rein, "py", 2);
    assert!(
        after.contains(&other_pid),
        "the other instance is untouched"
    );
    assert!(!after.contains(&victim_pid), "the replaced one is gone");
    assert!(instances(&rein, "py").iter().any(|i| i["id"] == by));
    assert_eq!(status(&rein, "py")["generation"].as_u64(), generation);

    // The same through the CLI, for the instance that replaced it.
    let out = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["reload", "py", "--instance", &by.to_string(), "--state"])
        .arg(&rein.state)
        .env_remove("REIN_CONTROL")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("the CLI's replacement to retire its instance", || {
        let ids: Vec<u64> = instances(&rein, "py")
            .iter()
            .filter_map(|i| i["id"].as_u64())
            .collect();
        ids.len() == 2 && !ids.contains(&by)
    });

    let (code, body) = rein.api(
        "GET",
        "/control/applications/py/instances/999/restart",
        None,
    );
    assert_eq!(code, 404, "{body}");
    assert_eq!(
        body["error"],
        "Application \"py\" has no running instance 999."
    );
    let (code, _) = rein.api(
        "GET",
        "/control/applications/nope/instances/1/restart",
        None,
    );
    assert_eq!(code, 404);
    let (code, _) = rein.api("POST", &path, None);
    assert_eq!(code, 405);
}
